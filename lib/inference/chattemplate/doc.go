// Package chattemplate renders Qwen3's chat template in Go, parses Qwen3
// completions (thinking, content, tool calls), and keeps the policy's
// per-episode prompt history in one of two modes.
//
// # Rendering
//
// Render reproduces the Jinja chat_template of Qwen3's tokenizer_config.json
// byte for byte, as transformers' apply_chat_template runs it: the system
// turn with the "# Tools" block (each tool serialized by tojson, i.e. Python
// json.dumps with ensure_ascii=False and ", "/": " separators, see ToJSON),
// user and system turns, tool results grouped into one user turn of
// <tool_response> blocks, assistant tool calls as
// <tool_call>\n{"name": …, "arguments": …}\n</tool_call>, reasoning_content
// (or <think>…</think> inside content) kept only for assistant turns after
// the last real user query, add_generation_prompt and enable_thinking=false
// (an empty think block). render_test.go checks it against two references:
// Python Jinja2 configured as transformers configures it
// (testdata/oracle/template_oracle.py under lib/inference/tokenizer) and
// @huggingface/jinja (oracle.mjs), with golden files so the test also runs
// without them. @huggingface/jinja 0.5.11 ignores the argument of
// str.strip/lstrip/rstrip, which Qwen3's template uses; the oracle script
// patches that to Python's behaviour.
//
// # History modes
//
// ModeIncremental (the default) is token-exact: New renders the first prompt
// (system prompt with tools, greeting, first user message, generation
// prompt) and tokenizes it; after that the history only grows. Each
// completion's ids are appended exactly as the server returned them (with a
// closing <|im_end|> added only if generation stopped without one), and each
// later batch of turns — tool results, the user's reply — is rendered as a
// delta
//
//	\n<|im_start|>user\n…<|im_end|>\n<|im_start|>assistant\n
//
// and tokenized on its own. Earlier text is never re-tokenized, so what the
// trainer trains on is exactly what the policy saw and produced, and every
// prompt is a prefix-extension of the previous call's prompt+completion (the
// prefix sharing schemas.LLMCall stores).
//
// This differs from Qwen3's template on purpose: the template drops the
// <think> block of every assistant turn before the last user query, so a
// re-rendered conversation shows the model a history without its own earlier
// thinking, and re-tokenizing generated text need not give back the ids the
// model sampled. In incremental mode the policy's thinking stays in its
// history. (Likewise with enable_thinking=false: every generation prompt
// shows the policy an empty think block, which the template omits when it
// re-renders earlier tool-round turns; incremental keeps what was shown.)
// Within one user query, for a model that writes exactly the template's
// format, the two agree token for token (history_test.go checks this).
//
// ModeRerender reproduces AReaL's proxy (chat_template_type "hf"): every
// prompt is the whole conversation re-rendered with the template and
// re-tokenized, completions taking part as their parsed messages. Outputs
// are recorded as generated in both modes; only the prompts differ. It
// exists for comparison with AReaL.
//
// # Parsing
//
// ParseCompletion splits a completion's text into reasoning, content and
// tool calls and reports malformed output (bad JSON, missing name,
// unterminated tags, chat markers written by the model) as an invalid
// format with a reason, which the producer counts for
// invalid_format_penalty.
package chattemplate
