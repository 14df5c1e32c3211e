// Package schemas is the data contract of tau2rl: the trajectory types every role exchanges, their
// Arrow IPC codec (the Kafka payload), the Parquet row layout of the archive, the schema version
// rules and the Kafka framing (header names and checks). It imports no other part of tau2rl, so
// producers, consumers and the trainer can all depend on it without cycles.
package schemas

import (
	"crypto/sha256"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Role is the speaker of a message, as in τ²-bench's message model.
type Role string

// Message roles. τ² never stores system messages in a trajectory, but producers may record the
// rendered system prompt for debugging, so the role is accepted.
const (
	RoleSystem    Role = "system"
	RoleAssistant Role = "assistant"
	RoleUser      Role = "user"
	RoleTool      Role = "tool"
)

// Valid reports whether r is one of the four known roles.
func (r Role) Valid() bool {
	switch r {
	case RoleSystem, RoleAssistant, RoleUser, RoleTool:
		return true
	}
	return false
}

// Requestor says which party issued a tool call (τ²'s ToolCall.requestor): agent tools and the
// telecom user-device tools live in different toolkits.
const (
	RequestorAssistant = "assistant"
	RequestorUser      = "user"
)

// Termination reasons, spelled exactly as τ²-bench writes them (SimulationRun.termination_reason).
// Only user_stop and agent_stop are graded; every other reason scores 0 in τ² (HEAD rule).
const (
	TerminationUserStop              = "user_stop"
	TerminationAgentStop             = "agent_stop"
	TerminationMaxSteps              = "max_steps"
	TerminationTooManyErrors         = "too_many_errors"
	TerminationAgentError            = "agent_error"
	TerminationUserError             = "user_error"
	TerminationTimeout               = "timeout"
	TerminationInfrastructureError   = "infrastructure_error"
	TerminationContextWindowExceeded = "context_window_exceeded"
	TerminationUnexpectedError       = "unexpected_error"
)

// Status says whether a trajectory is a real, graded episode or the record of an infrastructure
// failure. An infrastructure failure is never a reward: consumers must not train on a trajectory
// whose Status is not StatusOK.
type Status string

// Trajectory statuses. The set is open from schema 1.1 on: a reader must treat any status other
// than StatusOK as "no reward" (docs/SCHEMA.md, version rules).
const (
	StatusOK         Status = "ok"
	StatusInfraError Status = "infra_error"
	// StatusNotEvaluated (schema 1.1) is a real episode, with its real termination, that could
	// not be graded because a reward-basis component needs an evaluator that was not configured
	// (NL_ASSERTION without an NL judge). It has no reward and is not an infrastructure failure;
	// `tau2-eval grade` with a judge can grade it later. Error says what was missing.
	StatusNotEvaluated Status = "not_evaluated"
)

// Reward basis components, spelled as τ²'s RewardType enum.
const (
	BasisDB           = "DB"
	BasisEnvAssertion = "ENV_ASSERTION"
	BasisAction       = "ACTION"
	BasisCommunicate  = "COMMUNICATE"
	BasisNLAssertion  = "NL_ASSERTION"
)

// Trajectory is one complete τ² episode as produced by a rollout producer: the conversation, the
// token-level record of every policy LLM call (what the trainer needs), and τ²'s grading. It is the
// unit of the "scored trajectories" topic and one row of the Parquet archive.
type Trajectory struct {
	// ID is a unique id (UUID) of this episode; consumers de-duplicate on it (at-least-once delivery).
	ID string `json:"id"`
	// TaskID is the τ² task id; it is the Kafka key and the GRPO prompt-group key.
	TaskID string `json:"task_id"`
	// Domain is the τ² domain (airline, retail, telecom, …); it names a Parquet partition directory,
	// so it must be path-safe (see ValidatePathComponent).
	Domain string `json:"domain"`
	// Split is the task split (train, test, base, …); also path-safe.
	Split string `json:"split"`
	// RequestID is the rollout request that caused this episode ("" when not produced on request,
	// e.g. evaluation runs).
	RequestID string `json:"request_id,omitempty"`
	// Trial is the trial index of this task within its group (0-based).
	Trial int `json:"trial"`
	// Seed is the seed passed to the agent and user LLMs for this trial.
	Seed int64 `json:"seed"`
	// StartedAt and EndedAt bound the episode in wall-clock time (UTC, microsecond precision is kept).
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	// PolicyVersionStart is the policy version the producer believed current when the episode
	// started. Per-token versions are in LLMCall.VersionRuns.
	PolicyVersionStart int64 `json:"policy_version_start"`
	// AgentModel and UserModel name the served policy model and the user-simulator model.
	AgentModel string `json:"agent_model"`
	UserModel  string `json:"user_model"`
	// Messages is the τ² trajectory in order (turn_idx order).
	Messages []Message `json:"messages"`
	// Termination is τ²'s termination reason (see the Termination* constants).
	Termination string `json:"termination"`
	// Reward is τ²'s reward (0 or 1 for graded episodes).
	Reward float64 `json:"reward"`
	// RewardBasis is the task's reward basis (components multiplied into Reward); nil when τ² did
	// not grade (premature termination) or the task has no evaluation criteria.
	RewardBasis []string `json:"reward_basis"`
	// Breakdown holds τ²'s reward_breakdown per component.
	Breakdown RewardBreakdown `json:"breakdown"`
	// RewardInfoJSON is τ²'s RewardInfo as JSON, verbatim, so an episode can be re-graded or audited
	// exactly ("" when not graded).
	RewardInfoJSON string `json:"reward_info_json,omitempty"`
	// ShapedReward is the episode-level reward after the producer's shaping (e.g. format penalties);
	// per-call values are in LLMCall.ShapedReward.
	ShapedReward float64 `json:"shaped_reward"`
	// InvalidFormatTurns counts policy outputs whose tool-call markup failed to parse.
	InvalidFormatTurns int `json:"invalid_format_turns"`
	// Calls is the token-level record of every policy LLM call, in call order.
	Calls []LLMCall `json:"calls"`
	// Status is StatusOK for a real, graded episode; StatusInfraError marks an infrastructure
	// failure and StatusNotEvaluated an episode that could not be graded: the reward fields of
	// both are meaningless and must never reach the trainer.
	Status Status `json:"status"`
	// Error describes the infrastructure failure, or why the episode was not evaluated ("" when
	// Status is ok).
	Error string `json:"error,omitempty"`
	// Tags are free-form string annotations (producer host, experiment name, …) kept for forward
	// compatibility without a schema change.
	Tags map[string]string `json:"tags,omitempty"`
}

// RewardBreakdown is τ²'s reward_breakdown: the reward of each component in the basis. A nil field
// means the component was not in the basis (or not evaluated), which is different from 0.
type RewardBreakdown struct {
	DB           *float64 `json:"DB,omitempty"`
	EnvAssertion *float64 `json:"ENV_ASSERTION,omitempty"`
	Action       *float64 `json:"ACTION,omitempty"`
	Communicate  *float64 `json:"COMMUNICATE,omitempty"`
	NLAssertion  *float64 `json:"NL_ASSERTION,omitempty"`
}

// Message is one τ² message. Assistant messages produced by the policy point at the LLM call that
// generated them (CallIndex); the canned greeting and user/tool messages have CallIndex -1.
type Message struct {
	Role Role `json:"role"`
	// Content is the text ("" when the message is only tool calls; τ² writes null there).
	Content string `json:"content"`
	// Reasoning is the policy's thinking text (e.g. a Qwen3 <think> block), kept apart from Content
	// because τ² never shows it to the other party.
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCalls are the calls this message makes (assistant or user); nil when none.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, for a tool message, the id of the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Requestor is, for a tool message, the party whose call it answers ("assistant" or "user").
	Requestor string `json:"requestor,omitempty"`
	// ToolError marks a tool message whose call raised an error (τ²'s ToolMessage.error).
	ToolError bool `json:"tool_error,omitempty"`
	// Turn is τ²'s turn_idx (position in the trajectory).
	Turn int `json:"turn"`
	// Timestamp is when the message was created (UTC).
	Timestamp time.Time `json:"timestamp"`
	// CallIndex is the index into Trajectory.Calls of the policy call that produced this message,
	// or -1.
	CallIndex int `json:"call_index"`
}

// ToolCall is one tool invocation inside a message.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON object of arguments, as raw JSON text.
	Arguments string `json:"arguments"`
	// Requestor is "assistant" or "user".
	Requestor string `json:"requestor"`
}

// VersionRun is a run of Count consecutive completion tokens generated by policy Version. A single
// completion can span versions when generation is interrupted by a weight update, so versions are
// recorded per token, run-length encoded (usually one run per call).
type VersionRun struct {
	Version int64 `json:"version"`
	Count   int32 `json:"count"`
}

// LLMCall is one policy LLM call: the training sample unit (AReaL "individual" export). Prompts are
// stored incrementally: when an earlier call's prompt+completion shares a prefix with this call's
// prompt, only the new suffix is stored, so bytes grow linearly with conversation length.
type LLMCall struct {
	// PromptRef is the index of an earlier call in the same trajectory whose full token sequence
	// (full prompt ‖ completion) shares the first PromptShared tokens with this call's prompt, or -1.
	PromptRef int `json:"prompt_ref"`
	// PromptShared is how many leading prompt tokens come from PromptRef's sequence (0 when
	// PromptRef is -1).
	PromptShared int `json:"prompt_shared"`
	// PromptTokens are the prompt tokens after the shared prefix (the whole prompt when PromptRef
	// is -1). Use Trajectory.FullPrompt to reconstruct the whole prompt.
	PromptTokens []int32 `json:"prompt_tokens"`
	// CompletionTokens are the generated tokens, including the stop token as returned.
	CompletionTokens []int32 `json:"completion_tokens"`
	// BehaviorLogprobs are the sampler's log-probabilities, one per completion token (nats).
	BehaviorLogprobs []float32 `json:"behavior_logprobs"`
	// VersionRuns give the policy version of every completion token; counts sum to
	// len(CompletionTokens).
	VersionRuns []VersionRun `json:"version_runs"`
	// LossMask, when non-nil, has one entry per completion token: 1 = trained, 0 = masked. Nil
	// means every completion token is trained (the common case, stored as a null).
	LossMask []uint8 `json:"loss_mask,omitempty"`
	// ShapedReward is this call's reward after shaping (e.g. turn_discount γ^(N-1-i)·R).
	ShapedReward float64 `json:"shaped_reward"`
	// FinishReason is the server's finish reason (stop, length, abort, …).
	FinishReason string `json:"finish_reason"`
	// InvalidFormat marks a completion whose tool-call markup failed to parse.
	InvalidFormat bool `json:"invalid_format,omitempty"`
	// LatencyMS is the wall-clock latency of the call in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
}

// Versions expands VersionRuns into one version per completion token.
func (c *LLMCall) Versions() []int64 {
	n := 0
	for _, r := range c.VersionRuns {
		if r.Count > 0 {
			n += int(r.Count)
		}
	}
	out := make([]int64, 0, n)
	for _, r := range c.VersionRuns {
		for k := int32(0); k < r.Count; k++ {
			out = append(out, r.Version)
		}
	}
	return out
}

// Trained reports whether completion token k carries loss (LossMask nil ⇒ all trained).
func (c *LLMCall) Trained(k int) bool {
	if c.LossMask == nil {
		return true
	}
	return k >= 0 && k < len(c.LossMask) && c.LossMask[k] != 0
}

// RunsFromVersions run-length encodes one version per token into VersionRuns.
func RunsFromVersions(versions []int64) []VersionRun {
	var runs []VersionRun
	for _, v := range versions {
		if n := len(runs); n > 0 && runs[n-1].Version == v && runs[n-1].Count < math.MaxInt32 {
			runs[n-1].Count++
			continue
		}
		runs = append(runs, VersionRun{Version: v, Count: 1})
	}
	return runs
}

// UniformVersion is the VersionRuns of n tokens all produced by version v (nil when n is 0).
func UniformVersion(v int64, n int) []VersionRun {
	if n <= 0 {
		return nil
	}
	return []VersionRun{{Version: v, Count: int32(n)}}
}

// sequenceLens gives the length of call i's full token sequence (full prompt ‖ completion), computed
// from references without materialising tokens. It assumes refs point strictly backwards.
func (t *Trajectory) sequenceLens() []int {
	lens := make([]int, len(t.Calls))
	for i := range t.Calls {
		c := &t.Calls[i]
		lens[i] = c.PromptShared + len(c.PromptTokens) + len(c.CompletionTokens)
	}
	return lens
}

// PromptLen is the length of call i's full prompt, without reconstructing it.
func (t *Trajectory) PromptLen(i int) int {
	c := &t.Calls[i]
	return c.PromptShared + len(c.PromptTokens)
}

// FullPrompt reconstructs call i's whole prompt by following PromptRef links. The result is a new
// slice the caller may keep or modify. It fails on a malformed reference chain instead of
// panicking.
func (t *Trajectory) FullPrompt(i int) ([]int32, error) {
	if i < 0 || i >= len(t.Calls) {
		return nil, fmt.Errorf("schemas: full prompt of call %d: %w: trajectory has %d calls", i, ErrInvalid, len(t.Calls))
	}
	// Collect the chain i → ref → ref … back to a root, checking it strictly decreases.
	chain := []int{i}
	for cur := i; t.Calls[cur].PromptRef >= 0; {
		ref := t.Calls[cur].PromptRef
		if ref >= cur {
			return nil, fmt.Errorf("schemas: full prompt of call %d: %w: call %d refers forward to %d", i, ErrInvalid, cur, ref)
		}
		chain = append(chain, ref)
		cur = ref
	}
	root := &t.Calls[chain[len(chain)-1]]
	if root.PromptShared != 0 {
		return nil, fmt.Errorf("schemas: full prompt of call %d: %w: call %d has no reference but prompt_shared %d", i, ErrInvalid, chain[len(chain)-1], root.PromptShared)
	}
	// seq holds the full sequence of the current chain element; walk from the root forward.
	seq := make([]int32, 0, t.PromptLen(i))
	seq = append(seq, root.PromptTokens...)
	for k := len(chain) - 2; k >= 0; k-- {
		ref := &t.Calls[chain[k+1]]
		seq = append(seq, ref.CompletionTokens...)
		c := &t.Calls[chain[k]]
		if c.PromptShared < 0 || c.PromptShared > len(seq) {
			return nil, fmt.Errorf("schemas: full prompt of call %d: %w: call %d shares %d tokens of call %d, which has %d", i, ErrInvalid, chain[k], c.PromptShared, chain[k+1], len(seq))
		}
		seq = append(seq[:c.PromptShared], c.PromptTokens...)
	}
	return seq, nil
}

// FullPrompts reconstructs every call's whole prompt in one pass (linear in the output size),
// which is what the trainer wants when it builds prefix trees.
func (t *Trajectory) FullPrompts() ([][]int32, error) {
	out := make([][]int32, len(t.Calls))
	for i := range t.Calls {
		c := &t.Calls[i]
		if c.PromptRef < 0 {
			if c.PromptShared != 0 {
				return nil, fmt.Errorf("schemas: full prompts: %w: call %d has no reference but prompt_shared %d", ErrInvalid, i, c.PromptShared)
			}
			out[i] = append([]int32(nil), c.PromptTokens...)
			continue
		}
		if c.PromptRef >= i {
			return nil, fmt.Errorf("schemas: full prompts: %w: call %d refers forward to %d", ErrInvalid, i, c.PromptRef)
		}
		ref := &t.Calls[c.PromptRef]
		refPrompt := out[c.PromptRef]
		refLen := len(refPrompt) + len(ref.CompletionTokens)
		if c.PromptShared < 0 || c.PromptShared > refLen {
			return nil, fmt.Errorf("schemas: full prompts: %w: call %d shares %d tokens of call %d, which has %d", ErrInvalid, i, c.PromptShared, c.PromptRef, refLen)
		}
		p := make([]int32, 0, c.PromptShared+len(c.PromptTokens))
		if c.PromptShared <= len(refPrompt) {
			p = append(p, refPrompt[:c.PromptShared]...)
		} else {
			p = append(p, refPrompt...)
			p = append(p, ref.CompletionTokens[:c.PromptShared-len(refPrompt)]...)
		}
		out[i] = append(p, c.PromptTokens...)
	}
	return out, nil
}

// CallInput describes one policy call for AppendCall: the full prompt as sent to the server and
// what came back.
type CallInput struct {
	Prompt           []int32
	Completion       []int32
	BehaviorLogprobs []float32
	// VersionRuns of the completion; when nil, UniformVersion(Version, len(Completion)) is used.
	VersionRuns []VersionRun
	Version     int64
	LossMask    []uint8
	// ShapedReward is usually set later, when the episode's reward is known.
	ShapedReward  float64
	FinishReason  string
	InvalidFormat bool
	LatencyMS     float64
}

// AppendCall records a policy call given its full prompt. It finds the earlier call whose full
// sequence (prompt ‖ completion) shares the longest common prefix with the prompt and stores only
// the remaining suffix, so a call that extends the previous turn costs only its new tokens. It
// returns the new call's index. Lengths are checked so a malformed call is an error here rather
// than at the consumer.
func (t *Trajectory) AppendCall(in CallInput) (int, error) {
	idx := len(t.Calls)
	if len(in.BehaviorLogprobs) != len(in.Completion) {
		return -1, fmt.Errorf("schemas: append call %d: %w: %d logprobs for %d completion tokens", idx, ErrInvalid, len(in.BehaviorLogprobs), len(in.Completion))
	}
	if in.LossMask != nil && len(in.LossMask) != len(in.Completion) {
		return -1, fmt.Errorf("schemas: append call %d: %w: loss mask of %d for %d completion tokens", idx, ErrInvalid, len(in.LossMask), len(in.Completion))
	}
	runs := in.VersionRuns
	if runs == nil {
		runs = UniformVersion(in.Version, len(in.Completion))
	}
	if err := checkRuns(runs, len(in.Completion)); err != nil {
		return -1, fmt.Errorf("schemas: append call %d: %w: %v", idx, ErrInvalid, err)
	}
	// Later calls share the most, and a call can share at most its own sequence length, so scan
	// backwards and skip calls too short to beat the best match: usually only the previous call's
	// prompt is reconstructed.
	lens := t.sequenceLens()
	bestRef, bestShared := -1, 0
	for j := idx - 1; j >= 0 && bestShared < len(in.Prompt); j-- {
		if lens[j] <= bestShared {
			continue
		}
		p, err := t.FullPrompt(j)
		if err != nil {
			return -1, fmt.Errorf("schemas: append call %d: %w", idx, err)
		}
		if n := commonPrefix2(p, t.Calls[j].CompletionTokens, in.Prompt); n > bestShared {
			bestRef, bestShared = j, n
		}
	}
	call := LLMCall{
		PromptRef:        bestRef,
		PromptShared:     bestShared,
		PromptTokens:     append([]int32(nil), in.Prompt[bestShared:]...),
		CompletionTokens: append([]int32(nil), in.Completion...),
		BehaviorLogprobs: append([]float32(nil), in.BehaviorLogprobs...),
		VersionRuns:      append([]VersionRun(nil), runs...),
		ShapedReward:     in.ShapedReward,
		FinishReason:     in.FinishReason,
		InvalidFormat:    in.InvalidFormat,
		LatencyMS:        in.LatencyMS,
	}
	if in.LossMask != nil {
		call.LossMask = make([]uint8, len(in.LossMask)) // non-nil even when empty
		copy(call.LossMask, in.LossMask)
	}
	t.Calls = append(t.Calls, call)
	return idx, nil
}

// commonPrefix2 is the length of the common prefix of (a ‖ b) and p.
func commonPrefix2(a, b, p []int32) int {
	n := 0
	for n < len(a) && n < len(p) && a[n] == p[n] {
		n++
	}
	if n < len(a) {
		return n
	}
	k := 0
	for k < len(b) && n+k < len(p) && b[k] == p[n+k] {
		k++
	}
	return n + k
}

func checkRuns(runs []VersionRun, n int) error {
	sum := 0
	for k, r := range runs {
		if r.Count <= 0 {
			return fmt.Errorf("version run %d has count %d", k, r.Count)
		}
		sum += int(r.Count)
	}
	if sum != n {
		return fmt.Errorf("version runs cover %d tokens, completion has %d", sum, n)
	}
	return nil
}

// GeneratedTokens is the number of completion tokens over all calls.
func (t *Trajectory) GeneratedTokens() int {
	n := 0
	for i := range t.Calls {
		n += len(t.Calls[i].CompletionTokens)
	}
	return n
}

// MaxVersion is the newest policy version of any completion token (PolicyVersionStart when there
// are none); staleness accounting uses it.
func (t *Trajectory) MaxVersion() int64 {
	m := t.PolicyVersionStart
	for i := range t.Calls {
		for _, r := range t.Calls[i].VersionRuns {
			if r.Version > m {
				m = r.Version
			}
		}
	}
	return m
}

// MinVersion is the oldest policy version of any completion token (PolicyVersionStart when there
// are none).
func (t *Trajectory) MinVersion() int64 {
	m := int64(math.MaxInt64)
	for i := range t.Calls {
		for _, r := range t.Calls[i].VersionRuns {
			if r.Version < m {
				m = r.Version
			}
		}
	}
	if m == math.MaxInt64 {
		return t.PolicyVersionStart
	}
	return m
}

// MaxAbsReward bounds every reward a trajectory carries (reward, shaped_reward and each call's
// shaped_reward): |r| ≤ 1e6. τ² rewards are in [0, 1] and shaping only scales them, so the bound
// is far from any real reward, while it keeps the trainer's arithmetic far from overflow: a group
// with rewards [1e308, 1e308, 0, 0] once overflowed the group mean into NaN advantages, and the
// trainer failed on that message at every restart. A trajectory outside the bound is invalid:
// dead-lettered by consumers, refused with 400 by tau2-proxy's session API. The bound is part of
// the schema rather than a per-binary setting so that every consumer agrees on it (the archive
// never holds a trajectory the trainer dead-letters). docs/SCHEMA.md.
const MaxAbsReward = 1e6

// RewardInRange reports whether r is a reward Validate accepts: finite and |r| ≤ MaxAbsReward.
func RewardInRange(r float64) bool { return r >= -MaxAbsReward && r <= MaxAbsReward }

// Validate checks the invariants every consumer relies on: ids present, path-safe domain and
// split, known status and roles, finite rewards within ±MaxAbsReward, per-call lengths that agree, prompt references that point
// backwards and share no more than the referenced sequence holds, and message→call links in range.
// Errors wrap ErrInvalid and name the offending element.
func (t *Trajectory) Validate() error {
	if t.ID == "" {
		return fmt.Errorf("schemas: %w: empty id", ErrInvalid)
	}
	if !utf8.ValidString(t.ID) {
		// The id is not quoted in the message: it would carry the invalid bytes along.
		return fmt.Errorf("schemas: %w: id is not valid UTF-8", ErrInvalid)
	}
	wrap := func(format string, a ...any) error {
		return fmt.Errorf("schemas: trajectory %s: %w: %s", t.ID, ErrInvalid, fmt.Sprintf(format, a...))
	}
	if t.TaskID == "" {
		return wrap("empty task_id")
	}
	if field := t.invalidUTF8(); field != "" {
		return wrap("%s is not valid UTF-8", field)
	}
	if err := ValidatePathComponent(t.Domain); err != nil {
		return wrap("domain: %v", err)
	}
	if err := ValidatePathComponent(t.Split); err != nil {
		return wrap("split: %v", err)
	}
	switch t.Status {
	case StatusOK:
		if t.Error != "" {
			return wrap("status ok but error %q", t.Error)
		}
	case StatusInfraError:
		if t.Error == "" {
			return wrap("status infra_error without an error message")
		}
	case StatusNotEvaluated:
		if t.Error == "" {
			return wrap("status not_evaluated without a reason in error")
		}
		if t.Termination == TerminationInfrastructureError {
			return wrap("status not_evaluated with termination %s (an infrastructure failure is status infra_error)", t.Termination)
		}
	default:
		// The status set is open (schema 1.1): a status from a newer minor is accepted as "not a
		// reward" when it is a plain lower-case word and, like every non-ok status, says why.
		if !statusWord(string(t.Status)) {
			return wrap("unknown status %q", t.Status)
		}
		if t.Error == "" {
			return wrap("unknown status %q without an error message", t.Status)
		}
	}
	if math.IsNaN(t.Reward) || math.IsInf(t.Reward, 0) {
		return wrap("reward is %v", t.Reward)
	}
	if !RewardInRange(t.Reward) {
		return wrap("reward %v is outside [%v, %v] (MaxAbsReward)", t.Reward, -MaxAbsReward, MaxAbsReward)
	}
	if !RewardInRange(t.ShapedReward) {
		return wrap("shaped_reward %v is outside [%v, %v] (MaxAbsReward)", t.ShapedReward, -MaxAbsReward, MaxAbsReward)
	}
	if !t.EndedAt.IsZero() && t.EndedAt.Before(t.StartedAt) {
		return wrap("ended_at %s before started_at %s", t.EndedAt, t.StartedAt)
	}
	lens := t.sequenceLens()
	for i := range t.Calls {
		c := &t.Calls[i]
		switch {
		case c.PromptRef < -1:
			return wrap("call %d: prompt_ref %d", i, c.PromptRef)
		case c.PromptRef >= i:
			return wrap("call %d: prompt_ref %d does not point to an earlier call", i, c.PromptRef)
		case c.PromptRef == -1 && c.PromptShared != 0:
			return wrap("call %d: prompt_shared %d without prompt_ref", i, c.PromptShared)
		case c.PromptShared < 0:
			return wrap("call %d: prompt_shared %d", i, c.PromptShared)
		case c.PromptRef >= 0 && c.PromptShared > lens[c.PromptRef]:
			return wrap("call %d: prompt_shared %d exceeds the %d tokens of call %d", i, c.PromptShared, lens[c.PromptRef], c.PromptRef)
		}
		if len(c.BehaviorLogprobs) != len(c.CompletionTokens) {
			return wrap("call %d: %d logprobs for %d completion tokens", i, len(c.BehaviorLogprobs), len(c.CompletionTokens))
		}
		if c.LossMask != nil && len(c.LossMask) != len(c.CompletionTokens) {
			return wrap("call %d: loss mask of %d for %d completion tokens", i, len(c.LossMask), len(c.CompletionTokens))
		}
		if err := checkRuns(c.VersionRuns, len(c.CompletionTokens)); err != nil {
			return wrap("call %d: %v", i, err)
		}
		if !RewardInRange(c.ShapedReward) {
			return wrap("call %d: shaped_reward %v is outside [%v, %v] (MaxAbsReward)", i, c.ShapedReward, -MaxAbsReward, MaxAbsReward)
		}
	}
	for i := range t.Messages {
		m := &t.Messages[i]
		if !m.Role.Valid() {
			return wrap("message %d: unknown role %q", i, m.Role)
		}
		if m.CallIndex < -1 || m.CallIndex >= len(t.Calls) {
			return wrap("message %d: call_index %d out of range (%d calls)", i, m.CallIndex, len(t.Calls))
		}
		for k, tc := range m.ToolCalls {
			if tc.Name == "" {
				return wrap("message %d tool call %d: empty name", i, k)
			}
		}
	}
	return nil
}

// invalidUTF8 names the first string of t that is not valid UTF-8 ("" when all are). Parquet and
// Arrow declare these columns as UTF-8 text; DuckDB refuses to read a file holding one invalid
// string ("Invalid string encoding found in Parquet file"), which would break every query over the
// whole archive, so such a trajectory must be rejected (dead-lettered) before it is written.
func (t *Trajectory) invalidUTF8() string {
	top := []struct {
		name, v string
	}{
		{"task_id", t.TaskID}, {"domain", t.Domain}, {"split", t.Split}, {"request_id", t.RequestID},
		{"agent_model", t.AgentModel}, {"user_model", t.UserModel}, {"termination", t.Termination},
		{"reward_info_json", t.RewardInfoJSON}, {"status", string(t.Status)}, {"error", t.Error},
	}
	for _, f := range top {
		if !utf8.ValidString(f.v) {
			return f.name
		}
	}
	for i, b := range t.RewardBasis {
		if !utf8.ValidString(b) {
			return fmt.Sprintf("reward_basis[%d]", i)
		}
	}
	for k, v := range t.Tags {
		if !utf8.ValidString(k) {
			return "a tag key"
		}
		if !utf8.ValidString(v) {
			return "a tag value"
		}
	}
	for i := range t.Messages {
		m := &t.Messages[i]
		for _, f := range []struct {
			name, v string
		}{{"role", string(m.Role)}, {"content", m.Content}, {"reasoning", m.Reasoning}, {"tool_call_id", m.ToolCallID}, {"requestor", m.Requestor}} {
			if !utf8.ValidString(f.v) {
				return fmt.Sprintf("message %d %s", i, f.name)
			}
		}
		for k, tc := range m.ToolCalls {
			for _, f := range []struct {
				name, v string
			}{{"id", tc.ID}, {"name", tc.Name}, {"arguments", tc.Arguments}, {"requestor", tc.Requestor}} {
				if !utf8.ValidString(f.v) {
					return fmt.Sprintf("message %d tool call %d %s", i, k, f.name)
				}
			}
		}
	}
	for i := range t.Calls {
		if !utf8.ValidString(t.Calls[i].FinishReason) {
			return fmt.Sprintf("call %d finish_reason", i)
		}
	}
	return ""
}

// statusWord reports whether s can be a status value: 1–32 of [a-z_], starting with a letter.
func statusWord(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// IDKey is a trajectory id reduced to the first 16 bytes of its SHA-256: ids are producer-chosen
// strings, and a fixed-size key keeps de-duplication sets (the archiver's window, the dataset
// reader's per-scan set) at about 40 bytes per id. A collision would need 2^64 ids.
type IDKey [16]byte

// KeyOfID returns the IDKey of a trajectory id.
func KeyOfID(id string) IDKey {
	s := sha256.Sum256([]byte(id))
	var k IDKey
	copy(k[:], s[:16])
	return k
}
