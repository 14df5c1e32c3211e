// Package proxy is the capture proxy behind tau2-proxy: an OpenAI-compatible
// chat-completions server that turns any agent written against the OpenAI
// API (the official SDKs, the OpenAI Agents SDK, LangChain, …) into a
// rollout producer, token-exact, without changes to the agent.
//
// Each call is rendered with Qwen3's chat template and tokenized here
// (lib/inference/chattemplate, lib/inference/tokenizer), generated from
// token ids by a token-mode policy server (SGLang /generate, vLLM
// /v1/completions, tau2-sampler; lib/inference/llm, resumed across weight
// updates by llm.GenerateResumable), parsed back into OpenAI's message
// (Qwen3's reasoning parser first, so a <tool_call> inside <think> stays
// thinking; then tool calls; the stop token never reaches the text) and
// recorded: every prompt token, generated token, log-prob and policy
// version, in a schemas.Trajectory per session.
//
// # Sessions
//
// A client names its session in the bearer token ("KEY;session=ID;task=T;
// group=G;trial=N;domain=D", values URL-escaped) or in X-Tau2-* headers. The
// first call opens it; POST /v1/sessions/{id}/reward sets its reward (and
// optionally one per call); POST /v1/sessions/{id}/finish publishes its one
// trajectory to the trajectories topic, exactly once (acknowledged by the
// broker before the session ends; a failed publish leaves it open for a
// retry); POST /v1/sessions/{id}/abort and expiry after session_ttl idle
// publish an infra-errors record instead — never a reward.
//
// # Token-exact histories, and drift
//
// A session keeps its recent conversation states: each call's prompt and
// each returned choice, as chattemplate.Incremental histories (the prompt
// ids; the completion ids exactly as generated, closed by <|im_end|>). A
// request whose messages extend a state (same messages, compared as the
// template renders them, ignoring reasoning and tool-call ids, which clients
// drop or renumber) is rendered as a delta after it, so every prompt the
// policy sees extends what it saw and generated before, with its own
// thinking kept. A request that extends no state — the client edited or
// dropped turns, or changed the tools — is rendered from scratch as a new
// prefix (tau2rl_proxy_template_drift_total, tag template_drift): the call
// still works and the trajectory records the prompt the model was actually
// given, never tokens it did not see.
//
// # The Responses API
//
// POST /v1/responses (responses.go), the default of current OpenAI agent
// frameworks, converts each request into the chat request of the same
// conversation — instructions as the system message; a response's
// reasoning, message and function_call items as one assistant message;
// function_call_output items as tool messages; flat function tools as chat
// tools — and serves it as a chat call, so both APIs share sessions,
// histories and trajectories token for token. A session keeps its recent
// responses for previous_response_id.
//
// # What is not OpenAI's
//
// Sampling is not constrained: tool_choice is checked but not enforced,
// response_format is ignored (the policy being trained generates freely and
// what it generates is what is recorded). Streaming answers are sent after
// the generation completes, in OpenAI's chunk shapes. logprobs are not
// returned (they are recorded).
package proxy
