// A tool-using agent written against the official openai SDK's Responses
// API (client.responses.create / client.responses.stream), unmodified but
// for its base URL, as OpenAI's function-calling guide writes one: function
// tools, function_call items executed (by the Go test's tool server),
// function_call_output items sent back, until an answer without a call.
//
// usage: node responses.mjs CONFIG_JSON
//   {baseURL, apiKey, toolsURL, system, user, scenario}
// scenario:
//   full        the whole input every time (the response's output items appended)
//   previous    previous_response_id and only the new items
//   stream      previous_response_id, streamed, accumulated by the SDK's ResponseStream
//   incomplete  streamed full input; max_output_tokens smaller than the second answer,
//               then "please continue"
// Prints {"input": [...], "outputs": [[...], ...], "statuses": [...], "finalText": "...",
// "streamEvents": N} on stdout: input is the conversation as this client holds it (in
// full input mode), outputs every response's output items.
import OpenAI from 'openai';

const cfg = JSON.parse(process.argv[2]);
const client = new OpenAI({ baseURL: cfg.baseURL, apiKey: cfg.apiKey, maxRetries: 0 });
const chatTools = await (await fetch(cfg.toolsURL + '/tools')).json();
const tools = chatTools.map((t) => ({
  type: 'function',
  name: t.function.name,
  description: t.function.description,
  parameters: t.function.parameters,
}));
const streamed = cfg.scenario === 'stream' || cfg.scenario === 'incomplete';
const chained = cfg.scenario === 'previous' || cfg.scenario === 'stream';

const input = [{ role: 'user', content: cfg.user }];
let fresh = input.slice();
let previous;
const outputs = [];
const statuses = [];
let streamEvents = 0;
let finalText = '';
let continued = false;

for (let turn = 0; turn < 10; turn++) {
  const params = { model: 'qwen3-policy', instructions: cfg.system, input: chained ? fresh : input, tools, temperature: 0.7 };
  if (chained && previous) params.previous_response_id = previous;
  if (cfg.scenario === 'incomplete' && turn === 1) params.max_output_tokens = 20;
  let res;
  if (streamed) {
    const stream = client.responses.stream(params);
    const seen = [];
    stream.on('event', (e) => seen.push(e.sequence_number));
    res = await stream.finalResponse();
    if (seen.length < 4 || seen.some((n, i) => n !== i)) throw new Error(`sequence numbers ${seen}`);
    streamEvents += seen.length;
  } else {
    res = await client.responses.create(params);
  }
  if (res.object !== 'response' || !res.id.startsWith('resp_')) throw new Error('not a response: ' + JSON.stringify(res));
  if (!res.usage || res.usage.input_tokens <= 0 || res.usage.total_tokens !== res.usage.input_tokens + res.usage.output_tokens) {
    throw new Error('bad usage ' + JSON.stringify(res.usage));
  }
  previous = res.id;
  statuses.push(res.status);
  outputs.push(res.output);
  input.push(...res.output);
  fresh = [];
  if (res.status === 'incomplete' && !continued) {
    continued = true;
    const more = { role: 'user', content: 'please continue' };
    input.push(more);
    fresh.push(more);
    continue;
  }
  const calls = res.output.filter((o) => o.type === 'function_call');
  if (calls.length === 0) {
    finalText = res.output_text;
    break;
  }
  for (const call of calls) {
    const out = await fetch(cfg.toolsURL + '/call', {
      method: 'POST',
      body: JSON.stringify({ name: call.name, arguments: call.arguments }),
    });
    const item = { type: 'function_call_output', call_id: call.call_id, output: await out.text() };
    input.push(item);
    fresh.push(item);
  }
}
process.stdout.write(JSON.stringify({ input, outputs, statuses, finalText, streamEvents }));
