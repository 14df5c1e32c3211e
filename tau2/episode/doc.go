// Package episode runs one τ²-bench episode exactly as τ²'s half-duplex
// orchestrator does (src/tau2/orchestrator/orchestrator.py @ a2c0247), with
// the policy either in token mode (prompts rendered and tokenized here, every
// token captured for training) or in chat mode (an OpenAI-compatible chat API,
// for baselines), and returns a schemas.Trajectory graded by the Go evaluator.
//
// # Protocol (what τ² does, and so what Run does)
//
//   - The environment is built for the task's domain and put into the task's
//     initial state (initialization_data, then initialization_actions, each
//     followed by sync_tools).
//   - Normal mode: the trajectory starts with the canned greeting
//     "Hi! How can I help you today?" from the agent, which is also the first
//     message of the agent's history; the first LLM call is the user
//     simulator's. Solo mode (telecom, mock): no greeting and no user; the
//     agent gets the user's tools and a done() tool, and its first message
//     must be a tool call.
//   - Each step routes the last message: AGENT|ENV → USER (user simulator),
//     USER|ENV → AGENT (policy), AGENT|USER → ENV (every tool call in order,
//     by requestor: agent tools, or the telecom device for user calls; each
//     error increments the error count). After each step the step count
//     grows by one and the environment syncs. Termination is checked after
//     every step that does not hand over to the environment: step_count ≥
//     max_steps → max_steps, errors ≥ max_errors (cumulative) →
//     too_many_errors. A user message that is not a tool call and contains
//     ###STOP###, ###TRANSFER### or ###OUT-OF-SCOPE### ends the episode with
//     user_stop; in solo mode a done() call ends it with agent_stop and any
//     text message with agent_error.
//   - User tool calls and their results are invisible to the agent; agent
//     tool calls and their results are invisible to the user (whose history
//     is role-flipped: agent text → user, its own messages → assistant).
//   - A task with a message_history (two mock tasks) resumes that
//     conversation, as τ²'s initialize does: set_state replays the
//     history's mutating tool calls into the environment after the initial
//     state (strictly: a result that differs from the recorded one is an
//     error), the history is checked as validate_message_history checks it,
//     and the trajectory starts with it (no greeting; τ²'s timestamps, one
//     second apart before the start). The routing resumes from its last
//     message: assistant text → user, user text → agent, a tool result →
//     its requestor (a trailing tool call would go to the environment, but
//     set_state already rejects a call without its result). The
//     participant that speaks next starts with the history before the last
//     message and receives that message as its input; the other starts
//     with the whole history; each sees it through τ²'s filter (the agent:
//     assistant messages, user text, its own tool results; the user: user
//     messages, agent text, its own tool results; role-flipped for the
//     user). A user stop token in the last message ends the episode at once
//     (user_stop), as does ###STOP### from a solo agent (agent_stop); a
//     solo history that hands the turn to the user, which solo mode lacks,
//     is an error (τ²'s DummyUser raises). Step and error counts start at
//     0. In token mode the history is part of the first call's prompt,
//     rendered as Qwen3's template renders the conversation: its assistant
//     turns are prompt tokens, never completions, so nothing the policy did
//     not generate is trained on. A malformed or invalid history is an
//     infrastructure error (stage environment), never a reward.
//
// # What differs from τ², on purpose
//
//   - Invalid format. A policy completion whose Qwen3 markup does not parse
//     (bad tool-call JSON, a missing name, an unterminated <tool_call> or
//     <think>, chat markers written by the model; see chattemplate.
//     ParseCompletion), or that is empty, is an invalid-format turn: the
//     call is recorded with InvalidFormat set, Trajectory.InvalidFormatTurns
//     counts it, and τ² sees an assistant TEXT message (no tool calls) whose
//     content is the completion's text after its thinking block, trimmed —
//     as AReaL's proxy passes unparseable output through. So the user
//     simulator reads the broken markup, nothing reaches the environment,
//     and the error count is unchanged. τ² itself would crash on malformed
//     tool-call JSON (json.loads) and record an infrastructure error; for
//     training, a format error is the policy's fault and must be visible to
//     the reward (see producers/shaping), never an infrastructure error.
//     In chat mode the server parses tool calls; a call whose arguments are
//     not a JSON object is kept and answered by the environment with a tool
//     error (counted toward max_errors), and the turn is counted as invalid.
//   - Thinking. In token mode with the default incremental history the
//     policy's own <think> blocks stay in its later prompts (Qwen3's
//     template would drop them); see lib/inference/chattemplate.
//   - add_thinking_tool adds AReaL's no-op think(thoughts) tool, answered by
//     the orchestrator itself with "Your thoughts are recorded. Please
//     continue your work." (not an environment tool: grading skips it as an
//     unknown name, which is how τ² treats AReaL's extra tool too).
//   - A prompt that leaves no room for generation (engine_max_tokens) ends
//     the episode with τ²'s context_window_exceeded (graded 0), because the
//     policy produced a too-long conversation; it is not an infrastructure
//     error.
//
// # Faults are not failures
//
// An LLM error after the client's retries (policy or user simulator), an
// empty user-simulator message, an environment setup error, an evaluator
// error or a cancelled or timed-out episode ends Run with an *InfraError:
// the partial trajectory has Status infra_error and its reward fields are
// meaningless. Nothing of that kind is ever returned as a reward of 0.
package episode
