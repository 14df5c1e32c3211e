// A small tool-using agent written the way users write them against the
// official openai SDK, unmodified but for its base URL: chat completions with
// tools, tool calls executed (by the Go test's tool server, over HTTP),
// results appended, until the model answers without a tool call.
//
// usage: node agent.mjs CONFIG_JSON
//   {baseURL, apiKey, toolsURL, system, user, scenario}
// scenario: basic | stream | max_tokens | rewrite
//   stream     streamed answers, accumulated by the SDK's ChatCompletionStream
//   max_tokens max_tokens smaller than the second answer; then "please continue"
//   rewrite    after the first tool round the client edits its first user turn
// Prints {"messages": [...], "finishes": [...]} — the conversation as this
// client holds it — on stdout.
import OpenAI from 'openai';

const cfg = JSON.parse(process.argv[2]);
const client = new OpenAI({ baseURL: cfg.baseURL, apiKey: cfg.apiKey, maxRetries: 0 });
const tools = await (await fetch(cfg.toolsURL + '/tools')).json();
const messages = [
  { role: 'system', content: cfg.system },
  { role: 'user', content: cfg.user },
];
const finishes = [];
let continued = false;

async function complete(params) {
  if (cfg.scenario === 'stream') {
    const stream = client.chat.completions.stream({ ...params, stream_options: { include_usage: true } });
    const final = await stream.finalChatCompletion();
    if (!final.usage || final.usage.total_tokens <= 0) throw new Error('stream without usage');
    return final.choices[0];
  }
  const res = await client.chat.completions.create(params);
  if (res.object !== 'chat.completion' || !res.id.startsWith('chatcmpl-')) throw new Error('not a chat.completion');
  return res.choices[0];
}

for (let turn = 0; turn < 10; turn++) {
  const params = { model: 'qwen3-policy', messages, tools, temperature: 0.7 };
  if (cfg.scenario === 'max_tokens' && turn === 1) params.max_tokens = 20;
  const choice = await complete(params);
  finishes.push(choice.finish_reason);
  const msg = choice.message;
  messages.push(msg);
  if (choice.finish_reason === 'length' && !continued) {
    continued = true;
    messages.push({ role: 'user', content: 'please continue' });
    continue;
  }
  if (!msg.tool_calls || msg.tool_calls.length === 0) break;
  for (const tc of msg.tool_calls) {
    const res = await fetch(cfg.toolsURL + '/call', {
      method: 'POST',
      body: JSON.stringify({ name: tc.function.name, arguments: tc.function.arguments }),
    });
    messages.push({ role: 'tool', tool_call_id: tc.id, content: await res.text() });
  }
  if (cfg.scenario === 'rewrite' && turn === 0) {
    messages[1] = { role: 'user', content: cfg.user + ' (and be brief)' };
  }
}
process.stdout.write(JSON.stringify({ messages, finishes }));
