// The OpenAI Agents SDK (@openai/agents), unmodified, with its default model
// provider — the Responses API — against the proxy: an Agent with two τ²
// airline tools (executed by the Go test's tool server) run to its final
// output, streamed or not.
//
// usage: node agents_responses.mjs CONFIG_JSON   {baseURL, apiKey, toolsURL, system, user, stream}
// Prints {"finalOutput": "...", "items": N} on stdout.
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents';

const cfg = JSON.parse(process.argv[2]);
setDefaultOpenAIClient(new OpenAI({ baseURL: cfg.baseURL, apiKey: cfg.apiKey, maxRetries: 0 }));
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
process.stdout.write(JSON.stringify({ finalOutput: result.finalOutput, items: result.newItems.length }));
