// The OpenAI Agents SDK (@openai/agents), unmodified, with its default model
// provider — the Responses API — against the proxy: an Agent with two τ²
// airline tools (executed by the Go test's tool server) run to its final
// output, streamed or not; with chain, run again with a follow-up from the
// first run's last response (previousResponseId: the SDK then sends only the
// new items, with previous_response_id).
//
// usage: node agents_responses.mjs CONFIG_JSON   {baseURL, apiKey, toolsURL, system, user, stream, chain}
// Prints {"finalOutput": "...", "items": N, "chained": "...", "sentPrevious": N} on stdout.
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents';

const cfg = JSON.parse(process.argv[2]);
// The fetch the client is given only counts the requests that carry
// previous_response_id; the SDKs are used as shipped.
let sentPrevious = 0;
const countingFetch = async (url, init) => {
  if (typeof init?.body === 'string' && JSON.parse(init.body).previous_response_id) sentPrevious++;
  return fetch(url, init);
};
setDefaultOpenAIClient(new OpenAI({ baseURL: cfg.baseURL, apiKey: cfg.apiKey, maxRetries: 0, fetch: countingFetch }));
setTracingDisabled(true);

const schemas = await (await fetch(cfg.toolsURL + '/tools')).json();
const pick = (name) => schemas.find((s) => s.function.name === name).function;
const airlineTool = (name) => {
  const f = pick(name);
  return tool({
    name,
    description: f.description,
    parameters: { ...f.parameters, additionalProperties: false },
    strict: false,
    execute: async (args) => {
      const res = await fetch(cfg.toolsURL + '/call', { method: 'POST', body: JSON.stringify({ name, arguments: JSON.stringify(args) }) });
      return await res.text();
    },
  });
};

const agent = new Agent({
  name: 'airline agent',
  instructions: cfg.system,
  model: 'qwen3-policy',
  tools: [airlineTool('get_user_details'), airlineTool('get_reservation_details')],
});
let result;
if (cfg.stream) {
  result = await run(agent, cfg.user, { maxTurns: 8, stream: true });
  for await (const _ of result.toStream()) {
    // drain the events; the SDK accumulates them
  }
  await result.completed;
} else {
  result = await run(agent, cfg.user, { maxTurns: 8 });
}
let chained = '';
if (cfg.chain) {
  if (!result.lastResponseId) throw new Error('no lastResponseId');
  const again = await run(agent, cfg.chain, { maxTurns: 8, previousResponseId: result.lastResponseId });
  chained = again.finalOutput;
}
process.stdout.write(JSON.stringify({ finalOutput: result.finalOutput, items: result.newItems.length, chained, sentPrevious }));
