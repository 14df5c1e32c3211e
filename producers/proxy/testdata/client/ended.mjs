// A call to a session that has ended, through the official openai SDK with
// its default retry policy (maxRetries 2; it retries 408, 409, 429 and ≥ 500
// unless the answer says "x-should-retry: false"). The SDK's fetch is
// wrapped only to count the requests it sends.
//
// usage: node ended.mjs CONFIG_JSON   {baseURL, apiKey}
// Prints {"status": N, "code": "...", "sends": N, "ms": N} on stdout.
import OpenAI from 'openai';

const cfg = JSON.parse(process.argv[2]);
let sends = 0;
const client = new OpenAI({
  baseURL: cfg.baseURL,
  apiKey: cfg.apiKey,
  fetch: (url, init) => { sends++; return fetch(url, init); },
});
const start = Date.now();
let status = 0, code = '';
try {
  await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'again' }] });
} catch (err) {
  if (!(err instanceof OpenAI.APIError)) throw err;
  status = err.status;
  code = err.code ?? '';
}
console.log(JSON.stringify({ status, code, sends, ms: Date.now() - start }));
