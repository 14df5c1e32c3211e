// Package evaluator grades τ² episodes exactly as tau2-bench's evaluator
// does (src/tau2/evaluator/*.py @ a2c0247, EvaluationType.ALL, text mode),
// and reads and rewrites τ² results files.
//
// Evaluate (or a Grader, which caches per-task work) takes a task, the
// episode's full trajectory (the task's message_history included) and its
// termination reason, and returns a RewardInfo in τ²'s JSON shape:
//
//   - termination other than user_stop/agent_stop → reward 0.0 with τ²'s note;
//   - no evaluation_criteria → reward 1.0;
//   - DB: the gold actions are replayed (errors ignored, no sync) on a fresh
//     environment put into the task's initial state; the transcript's
//     mutating tool calls are replayed (through get_response, with sync) on
//     another; the agent and user DBs must be equal (τ²'s sha256 equality);
//   - ENV_ASSERTION: the task's env assertions run on the replayed env;
//   - ACTION: every gold action must match some tool call of the transcript
//     (compare_args semantics, Python ==, requestor ignored);
//   - COMMUNICATE: every communicate_info string must occur, lower-cased,
//     in some assistant text with commas removed;
//   - NL_ASSERTION: an LLM judge (Judge) with τ²'s exact prompts, run only
//     when NL_ASSERTION is in the reward basis.
//
// The reward is the product over the task's reward_basis. When the basis
// needs the NL judge and none is configured, the NL component is not
// evaluated: RewardInfo.Reward is nil (JSON "reward": null),
// RewardInfo.NotEvaluated lists NL_ASSERTION, reward_breakdown holds only
// the components that were evaluated, nl_assertions is null and info.nl
// carries NotEvaluatedNote. Such a reward is neither 0 nor 1; callers must
// not train or score on it (Success reports false, Evaluated false).
//
// Failures of the grading machinery itself (an env assertion that raises,
// a malformed trajectory, a strict-replay mismatch, a judge that is
// unreachable or answers unparseable JSON) are returned as errors, never as
// a reward: τ² turns them into infrastructure errors.
//
// The Results type reads τ²'s monolithic results JSON (Results{timestamp,
// info, tasks, simulations}) and writes it back byte for byte except for
// the reward_info values it replaces (written in pydantic's JSON style,
// matching the file's indentation), so unknown fields survive a regrade.
// PassHatK computes τ²'s pass^k.
package evaluator
