package schemas

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// SyntheticOptions shapes the SYNTHETIC trajectories made by Synthetic. They are fake data with a
// realistic shape (sizes, prefix sharing, message mix) for benchmarks, load tests and the Kafka
// synthetic load source; they are never τ² episodes and must not be trained on.
type SyntheticOptions struct {
	// Domain and Split of the generated trajectories.
	Domain string `yaml:"domain"`
	Split  string `yaml:"split"`
	// Tasks is the number of distinct task ids to draw from ("synthetic-task-<k>").
	Tasks int `yaml:"tasks"`
	// Calls is the number of policy LLM calls per trajectory.
	Calls int `yaml:"calls"`
	// ContextTokens is the prompt length of the last call (system prompt + history).
	ContextTokens int `yaml:"context_tokens"`
	// CompletionTokens is the mean completion length of one call.
	CompletionTokens int `yaml:"completion_tokens"`
	// ThinkTokens is the length of a thinking block at the start of each completion; when
	// DropThinking is set it is removed from the re-rendered history, as Qwen3's template does,
	// so later prompts share only a prefix of earlier sequences.
	ThinkTokens  int  `yaml:"think_tokens"`
	DropThinking bool `yaml:"drop_thinking"`
	// PolicyVersion is the version of all generated tokens.
	PolicyVersion int64 `yaml:"policy_version"`
	// Start is the wall-clock start of the first trajectory's time range.
	Start time.Time `yaml:"start"`
	// TokenDistribution draws the token ids: "uniform" (the default; every id of the Qwen3
	// vocabulary equally likely, which is incompressible and so the worst case for the topic's and
	// the archive's zstd) or "zipf" (id k with probability ∝ (k+2)^-1.1: byte-level BPE numbers
	// merges roughly by corpus frequency, so real Qwen3 token streams are dominated by small ids
	// and compress like this, not like uniform ids). Both are synthetic; report numbers for both.
	TokenDistribution string `yaml:"token_distribution"`
}

// Token distributions of SyntheticOptions.TokenDistribution.
const (
	TokensUniform = "uniform"
	TokensZipf    = "zipf"
)

// ValidateTokenDistribution reports whether s names a token distribution ("" means uniform).
func ValidateTokenDistribution(s string) error {
	switch s {
	case "", TokensUniform, TokensZipf:
		return nil
	}
	return fmt.Errorf("schemas: synthetic token_distribution %q (want %s or %s)", s, TokensUniform, TokensZipf)
}

// DefaultSyntheticOptions: airline/train, 30 calls, 8k-token final context, 120-token completions
// with a 40-token thinking block dropped from history, 64 tasks, version 0.
func DefaultSyntheticOptions() SyntheticOptions {
	return SyntheticOptions{
		Domain: "airline", Split: "train", Tasks: 64, Calls: 30, ContextTokens: 8192,
		CompletionTokens: 120, ThinkTokens: 40, DropThinking: true,
		Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

const vocabSize = 151643 // Qwen3 regular-token vocabulary size

var synthWords = strings.Fields(`the reservation flight booking refund passenger cabin economy business
	baggage change cancel user id order item payment credit card gift certificate please confirm
	details status delayed upgrade seat policy agent customer help you can I would like to your
	today number account address phone exchange return product price total insurance segment date`)

func synthText(rng *rand.Rand, tokens int) string {
	var b strings.Builder
	for i := 0; i < tokens*3/4+1; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(synthWords[rng.IntN(len(synthWords))])
	}
	return b.String()
}

// tokenSource draws synthetic token ids (see SyntheticOptions.TokenDistribution).
type tokenSource struct {
	rng  *rand.Rand
	zipf *rand.Zipf // nil: uniform
}

func newTokenSource(rng *rand.Rand, dist string) tokenSource {
	ts := tokenSource{rng: rng}
	if dist == TokensZipf {
		ts.zipf = rand.NewZipf(rng, 1.1, 2, vocabSize-1)
	}
	return ts
}

func (ts tokenSource) tokens(n int) []int32 {
	out := make([]int32, n)
	if ts.zipf != nil {
		for i := range out {
			out[i] = int32(ts.zipf.Uint64())
		}
		return out
	}
	for i := range out {
		out[i] = int32(ts.rng.IntN(vocabSize))
	}
	return out
}

func synthUUID(rng *rand.Rand) string {
	a, b := rng.Uint64(), rng.Uint64()
	a = a&^0xf000 | 0x4000         // version 4
	b = b&^(0xc<<60) | (0x8 << 60) // variant 10
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xffff, b>>48, b&0xffffffffffff)
}

// Synthetic returns one SYNTHETIC trajectory (see SyntheticOptions) drawn from rng. Its calls are
// recorded with AppendCall, so prompt sharing is exactly what a producer would store, and it
// passes Validate. An unknown TokenDistribution draws uniform ids (ValidateTokenDistribution
// rejects it where options come from configuration).
func Synthetic(rng *rand.Rand, o SyntheticOptions) *Trajectory {
	toks := newTokenSource(rng, o.TokenDistribution)
	if o.Calls < 1 {
		o.Calls = 1
	}
	if o.Tasks < 1 {
		o.Tasks = 1
	}
	if o.CompletionTokens < 1 {
		o.CompletionTokens = 1
	}
	if o.ThinkTokens >= o.CompletionTokens {
		o.ThinkTokens = o.CompletionTokens / 2
	}
	start := o.Start.Add(time.Duration(rng.Int64N(int64(time.Hour)))).UTC().Truncate(time.Microsecond)
	t := &Trajectory{
		ID:                 synthUUID(rng),
		TaskID:             fmt.Sprintf("synthetic-task-%d", rng.IntN(o.Tasks)),
		Domain:             o.Domain,
		Split:              o.Split,
		RequestID:          synthUUID(rng),
		Trial:              rng.IntN(8),
		Seed:               rng.Int64N(1_000_000),
		StartedAt:          start,
		PolicyVersionStart: o.PolicyVersion,
		AgentModel:         "synthetic-policy",
		UserModel:          "synthetic-user",
		Status:             StatusOK,
		Tags:               map[string]string{"source": "synthetic"},
	}
	now := start
	tick := func() time.Time {
		now = now.Add(time.Duration(200+rng.IntN(3000)) * time.Millisecond)
		return now
	}
	t.Messages = append(t.Messages, Message{Role: RoleAssistant, Content: "Hi! How can I help you today?", Timestamp: tick(), CallIndex: -1})

	system := o.ContextTokens / 4
	// Each call's prompt grows by the previous answer plus a new observation.
	growth := (o.ContextTokens - system) / o.Calls
	prompt := toks.tokens(system)
	for i := 0; i < o.Calls; i++ {
		// Observation: a user message, or the tool result of the previous call's tool call.
		obsTokens := max(growth-(o.CompletionTokens-o.ThinkTokens), 8)
		prev := len(t.Messages) - 1
		if i%2 == 1 && len(t.Messages[prev].ToolCalls) > 0 {
			tc := t.Messages[prev].ToolCalls[0]
			t.Messages = append(t.Messages, Message{Role: RoleTool, Content: `{"result": "` + synthText(rng, obsTokens) + `"}`,
				ToolCallID: tc.ID, Requestor: RequestorAssistant, Timestamp: tick(), CallIndex: -1})
		} else {
			t.Messages = append(t.Messages, Message{Role: RoleUser, Content: synthText(rng, obsTokens), Timestamp: tick(), CallIndex: -1})
		}
		prompt = append(prompt, toks.tokens(obsTokens)...)

		n := max(o.CompletionTokens/2+rng.IntN(o.CompletionTokens+1), o.ThinkTokens+1)
		completion := toks.tokens(n)
		logprobs := make([]float32, n)
		for k := range logprobs {
			logprobs[k] = -float32(rng.ExpFloat64() * 0.3)
		}
		idx, err := t.AppendCall(CallInput{
			Prompt: prompt, Completion: completion, BehaviorLogprobs: logprobs, Version: o.PolicyVersion,
			FinishReason: "stop", LatencyMS: 50 + rng.Float64()*900,
		})
		if err != nil {
			// The inputs above satisfy AppendCall's checks by construction.
			panic(fmt.Sprintf("schemas: synthetic: %v", err))
		}
		msg := Message{Role: RoleAssistant, Reasoning: synthText(rng, o.ThinkTokens), Timestamp: tick(), CallIndex: idx}
		if i%2 == 0 {
			args, _ := json.Marshal(map[string]string{"reservation_id": fmt.Sprintf("R%05d", rng.IntN(100000))})
			msg.ToolCalls = []ToolCall{{ID: fmt.Sprintf("call_%d_%d", i, rng.IntN(1<<30)), Name: "get_reservation_details",
				Arguments: string(args), Requestor: RequestorAssistant}}
		} else {
			msg.Content = synthText(rng, n-o.ThinkTokens)
		}
		t.Messages = append(t.Messages, msg)
		history := completion
		if o.DropThinking {
			history = completion[o.ThinkTokens:]
		}
		prompt = append(prompt, history...)
	}
	for i := range t.Messages {
		t.Messages[i].Turn = i
	}
	t.EndedAt = tick()
	t.Termination = TerminationUserStop
	if rng.IntN(2) == 0 {
		t.Reward = 1
	}
	one, r := 1.0, t.Reward
	t.RewardBasis = []string{BasisDB, BasisCommunicate}
	t.Breakdown = RewardBreakdown{DB: &r, Communicate: &one}
	info, _ := json.Marshal(map[string]any{
		"reward": t.Reward, "reward_basis": t.RewardBasis,
		"reward_breakdown": map[string]float64{BasisDB: r, BasisCommunicate: one},
		"db_check":         map[string]any{"db_match": r == 1, "db_reward": r},
	})
	t.RewardInfoJSON = string(info)
	t.ShapedReward = t.Reward
	for i := range t.Calls {
		t.Calls[i].ShapedReward = t.Reward
	}
	return t
}
