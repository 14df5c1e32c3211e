// Package llm holds tau2rl's clients for inference servers.
//
//   - Policy (token mode): SGLang's POST /generate with input_ids and vLLM's
//     POST /v1/completions with a token-id prompt, both returning output ids
//     and per-token log-probs, normalized into GenerateResult
//     (docs/INFERENCE.md §1 and §3). The producer renders and tokenizes
//     prompts itself (lib/inference/chattemplate), so training sees exactly the
//     tokens the policy saw and produced.
//   - Chat: OpenAI-compatible chat completions through
//     github.com/sashabaranov/go-openai for chat models (user simulator, NL
//     judge, baseline agents), with its gaps fixed by a custom HTTP doer:
//     temperature 0 is sent, and extra body fields (top_k,
//     chat_template_kwargs, return_token_ids, …) are merged into the JSON.
//   - Reloader: SGLang /update_weights_from_disk, vLLM's dev-mode
//     weight-transfer sequence, and a no-op for tests.
//
// Every call goes through an Endpoint: a per-server concurrency limit (a
// semaphore held for the whole call), the process-wide tuned http.Transport
// (keep-alive connections reused, up to 1024 idle per host), a per-attempt
// timeout, retries with exponential backoff and full jitter on connection
// errors, timeouts, 429 and 5xx (never on other 4xx), honouring Retry-After,
// and Prometheus metrics (tau2rl_llm_*) on an injectable registerer.
//
// Several policy endpoints (data-parallel servers) form a Balanced pool:
// each call goes to the endpoint in service with the fewest calls in flight,
// and passive health tracking (HealthConfig) ejects an endpoint after
// consecutive infrastructure failures for a doubling cool-down, then lets one
// probe call decide whether it returns; with every endpoint ejected, calls go
// to the least recently failed one instead of failing untried
// (tau2rl_llm_healthy_endpoints, tau2rl_llm_endpoint_in_service,
// tau2rl_llm_endpoint_ejections_total).
//
// Errors are *Error values that wrap one kind — ErrUnavailable (an
// infrastructure failure: never to be scored as a reward), ErrRejected (4xx)
// or ErrBadResponse (undecodable or inconsistent 2xx) — or the caller's
// context error; test with errors.Is or IsInfrastructure.
package llm
