// Package protocol is the one definition of the inference wire formats tau2rl speaks, as
// SGLang's io_struct.py is SGLang's: the request and response bodies of SGLang's POST /generate
// (with meta_info and its log-prob triples), vLLM's POST /v1/completions with a token-id prompt
// (with its logprobs), OpenAI chat completions (tools, tool calls, log-probs, streaming chunks),
// the weight-update and control endpoints of both servers, and the error bodies. Every server
// (tau2-sampler's httpapi, the scripted test server llmtest, the capture proxy's chat side) and
// every client (lib/inference/llm) encodes and decodes through these types, so a field's name,
// its default and its validation are written once and cannot drift between a server and the
// client that reads it. docs/INFERENCE.md describes the formats; the section numbers in comments
// are that file's.
//
// Rules that were chosen, not copied (docs/INFERENCE.md, "One protocol package"):
//
//   - Log-probs are clamped with ClampLogprob (below −9999, −Inf and NaN become −9999, +Inf 0)
//     wherever a server of the project encodes one: vLLM's rule, and JSON has no infinities.
//   - vLLM's text_offset is cumulative Python len() of the reported token strings, that is
//     Unicode code points, not bytes; with return_tokens_as_token_ids the reported strings are
//     the "token_id:N" strings and the offsets count those, as vLLM's
//     _create_completion_logprobs does (NewCompletionLogprobs).
//
// The package imports nothing of the project but the chat template's wire message, so every
// room that talks to an inference server may use it, the GPU room included.
package protocol
