package schemas

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func seq(from, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(from + i)
	}
	return out
}

func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func zeros(n int) []float32 { return make([]float32, n) }

func TestAppendCallSharing(t *testing.T) {
	sys := seq(1000, 50)
	c0 := seq(2000, 10)
	think1, ans1 := seq(3000, 4), seq(3100, 6)
	c1 := cat(think1, ans1)
	obs := seq(4000, 7)
	tests := []struct {
		name       string
		prompts    [][]int32
		comps      [][]int32
		wantRef    []int
		wantShared []int
		wantSuffix []int
	}{
		{
			name:       "extends previous prompt and completion",
			prompts:    [][]int32{sys, cat(sys, c0, obs)},
			comps:      [][]int32{c0, seq(5000, 3)},
			wantRef:    []int{-1, 0},
			wantShared: []int{0, 60},
			wantSuffix: []int{50, 7},
		},
		{
			name:       "thinking dropped from history shares only the prompt",
			prompts:    [][]int32{sys, cat(sys, ans1, obs)},
			comps:      [][]int32{c1, seq(5000, 3)},
			wantRef:    []int{-1, 0},
			wantShared: []int{0, 50},
			wantSuffix: []int{50, 13},
		},
		{
			name:       "unrelated prompt has no reference",
			prompts:    [][]int32{sys, seq(9000, 5)},
			comps:      [][]int32{c0, c0},
			wantRef:    []int{-1, -1},
			wantShared: []int{0, 0},
			wantSuffix: []int{50, 5},
		},
		{
			name:       "best match is an earlier call, not the latest",
			prompts:    [][]int32{sys, seq(9000, 5), cat(sys, c0, obs)},
			comps:      [][]int32{c0, c0, c0},
			wantRef:    []int{-1, -1, 0},
			wantShared: []int{0, 0, 60},
			wantSuffix: []int{50, 5, 7},
		},
		{
			name:       "prompt is a strict prefix of an earlier prompt",
			prompts:    [][]int32{sys, sys[:20]},
			comps:      [][]int32{c0, c0},
			wantRef:    []int{-1, 0},
			wantShared: []int{0, 20},
			wantSuffix: []int{50, 0},
		},
		{
			name:       "empty first prompt",
			prompts:    [][]int32{nil, c0},
			comps:      [][]int32{c0, c0},
			wantRef:    []int{-1, 0},
			wantShared: []int{0, 10},
			wantSuffix: []int{0, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Trajectory{ID: "x", TaskID: "t", Domain: "airline", Split: "train", Status: StatusOK}
			for i := range tc.prompts {
				idx, err := tr.AppendCall(CallInput{Prompt: tc.prompts[i], Completion: tc.comps[i], BehaviorLogprobs: zeros(len(tc.comps[i])), Version: 3})
				if err != nil {
					t.Fatal(err)
				}
				if idx != i {
					t.Fatalf("index %d, want %d", idx, i)
				}
			}
			for i, c := range tr.Calls {
				if c.PromptRef != tc.wantRef[i] || c.PromptShared != tc.wantShared[i] || len(c.PromptTokens) != tc.wantSuffix[i] {
					t.Errorf("call %d: ref %d shared %d suffix %d; want %d %d %d", i, c.PromptRef, c.PromptShared, len(c.PromptTokens), tc.wantRef[i], tc.wantShared[i], tc.wantSuffix[i])
				}
			}
			all, err := tr.FullPrompts()
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.prompts {
				got, err := tr.FullPrompt(i)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.prompts[i]
				if len(want) == 0 {
					want = nil
				}
				if len(got) == 0 {
					got = nil
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("FullPrompt(%d) = %v, want %v", i, got, want)
				}
				if len(all[i]) != len(want) || (len(want) > 0 && !reflect.DeepEqual(all[i], want)) {
					t.Errorf("FullPrompts()[%d] = %v, want %v", i, all[i], want)
				}
				if tr.PromptLen(i) != len(tc.prompts[i]) {
					t.Errorf("PromptLen(%d) = %d, want %d", i, tr.PromptLen(i), len(tc.prompts[i]))
				}
			}
			if err := tr.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAppendCallRejectsBadLengths(t *testing.T) {
	tests := []struct {
		name string
		in   CallInput
		want string
	}{
		{"logprobs", CallInput{Completion: seq(0, 3), BehaviorLogprobs: zeros(2)}, "2 logprobs for 3"},
		{"loss mask", CallInput{Completion: seq(0, 3), BehaviorLogprobs: zeros(3), LossMask: []uint8{1}}, "loss mask of 1"},
		{"version runs", CallInput{Completion: seq(0, 3), BehaviorLogprobs: zeros(3), VersionRuns: []VersionRun{{1, 2}}}, "cover 2 tokens"},
		{"zero run", CallInput{Completion: seq(0, 3), BehaviorLogprobs: zeros(3), VersionRuns: []VersionRun{{1, 3}, {2, 0}}}, "count 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Trajectory{}
			_, err := tr.AppendCall(tc.in)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.want)
			}
			if len(tr.Calls) != 0 {
				t.Fatal("rejected call was recorded")
			}
		})
	}
}

func TestPromptStorageIsLinear(t *testing.T) {
	o := DefaultSyntheticOptions()
	tr := Synthetic(rand.New(rand.NewPCG(1, 2)), o)
	stored, full := 0, 0
	for i := range tr.Calls {
		stored += len(tr.Calls[i].PromptTokens)
		full += tr.PromptLen(i)
	}
	// Linear: stored prompt tokens ≈ final context, not the sum of all contexts.
	last := tr.PromptLen(len(tr.Calls) - 1)
	if stored > last+o.CompletionTokens*o.Calls*2 {
		t.Fatalf("stored %d prompt tokens for a final context of %d (full sum %d)", stored, last, full)
	}
	if full < 5*stored {
		t.Fatalf("expected prefix sharing to save ≥5×: stored %d, full %d", stored, full)
	}
}

func TestVersions(t *testing.T) {
	c := LLMCall{VersionRuns: RunsFromVersions([]int64{3, 3, 4, 4, 4, 3})}
	want := []VersionRun{{3, 2}, {4, 3}, {3, 1}}
	if !reflect.DeepEqual(c.VersionRuns, want) {
		t.Fatalf("runs %v, want %v", c.VersionRuns, want)
	}
	if got := c.Versions(); !reflect.DeepEqual(got, []int64{3, 3, 4, 4, 4, 3}) {
		t.Fatalf("Versions() = %v", got)
	}
	if UniformVersion(5, 0) != nil || !reflect.DeepEqual(UniformVersion(5, 2), []VersionRun{{5, 2}}) {
		t.Fatal("UniformVersion")
	}
	tr := &Trajectory{PolicyVersionStart: 2, Calls: []LLMCall{c}}
	if tr.MaxVersion() != 4 || tr.MinVersion() != 3 {
		t.Fatalf("max %d min %d", tr.MaxVersion(), tr.MinVersion())
	}
	if (&Trajectory{PolicyVersionStart: 7}).MinVersion() != 7 {
		t.Fatal("MinVersion without calls")
	}
	m := LLMCall{LossMask: []uint8{1, 0}}
	if !m.Trained(0) || m.Trained(1) || m.Trained(2) || !c.Trained(5) {
		t.Fatal("Trained")
	}
}

func validTrajectory() *Trajectory {
	tr := &Trajectory{ID: "id-1", TaskID: "7", Domain: "retail", Split: "test", Status: StatusOK,
		StartedAt: time.Unix(100, 0), EndedAt: time.Unix(200, 0)}
	tr.AppendCall(CallInput{Prompt: seq(0, 10), Completion: seq(10, 5), BehaviorLogprobs: zeros(5)})
	tr.AppendCall(CallInput{Prompt: seq(0, 20), Completion: seq(20, 5), BehaviorLogprobs: zeros(5)})
	tr.Messages = []Message{{Role: RoleUser, CallIndex: -1}, {Role: RoleAssistant, CallIndex: 1, ToolCalls: []ToolCall{{Name: "f"}}}}
	return tr
}

func TestValidate(t *testing.T) {
	if err := validTrajectory().Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*Trajectory)
		want   string
	}{
		{"empty id", func(t *Trajectory) { t.ID = "" }, "empty id"},
		{"empty task", func(t *Trajectory) { t.TaskID = "" }, "empty task_id"},
		{"domain traversal", func(t *Trajectory) { t.Domain = "../../etc" }, "domain"},
		{"split slash", func(t *Trajectory) { t.Split = "a/b" }, "split"},
		{"unknown status", func(t *Trajectory) { t.Status = "done" }, "unknown status"},
		{"status not a word", func(t *Trajectory) { t.Status, t.Error = "Done!", "x" }, `unknown status "Done!"`},
		{"not evaluated without reason", func(t *Trajectory) { t.Status = StatusNotEvaluated }, "not_evaluated without a reason"},
		{"not evaluated infra termination", func(t *Trajectory) {
			t.Status, t.Error, t.Termination = StatusNotEvaluated, "no judge", TerminationInfrastructureError
		}, "status not_evaluated with termination infrastructure_error"},
		{"ok with error", func(t *Trajectory) { t.Error = "boom" }, "status ok but error"},
		{"infra without error", func(t *Trajectory) { t.Status = StatusInfraError }, "without an error"},
		{"nan reward", func(t *Trajectory) { t.Reward = math.NaN() }, "reward is NaN"},
		// A finite but huge reward overflowed the trainer's group mean into NaN advantages on
		// every restart (issue 27 item 2): rewards are bounded by MaxAbsReward.
		{"huge reward", func(t *Trajectory) { t.Reward = 1e308 }, "reward 1e+308 is outside [-1e+06, 1e+06]"},
		{"max float reward", func(t *Trajectory) { t.Reward = -math.MaxFloat64 }, "reward -1.7976931348623157e+308 is outside"},
		{"reward just above", func(t *Trajectory) { t.Reward = math.Nextafter(MaxAbsReward, math.Inf(1)) }, "reward 1.0000000000000001e+06 is outside"},
		{"huge shaped reward", func(t *Trajectory) { t.ShapedReward = 1e7 }, "shaped_reward 1e+07 is outside"},
		{"nan shaped reward", func(t *Trajectory) { t.ShapedReward = math.NaN() }, "shaped_reward NaN is outside"},
		{"huge call shaped reward", func(t *Trajectory) { t.Calls[1].ShapedReward = -1e308 }, "call 1: shaped_reward -1e+308 is outside"},
		{"inf call shaped reward", func(t *Trajectory) { t.Calls[0].ShapedReward = math.Inf(1) }, "call 0: shaped_reward +Inf is outside"},
		{"ended before started", func(t *Trajectory) { t.EndedAt = time.Unix(50, 0) }, "before started_at"},
		{"forward ref", func(t *Trajectory) { t.Calls[0].PromptRef = 1 }, "does not point to an earlier call"},
		{"self ref", func(t *Trajectory) { t.Calls[1].PromptRef = 1 }, "does not point to an earlier call"},
		{"negative ref", func(t *Trajectory) { t.Calls[1].PromptRef = -2 }, "prompt_ref -2"},
		{"shared without ref", func(t *Trajectory) { t.Calls[0].PromptShared = 3 }, "without prompt_ref"},
		{"shared too long", func(t *Trajectory) { t.Calls[1].PromptShared = 16 }, "exceeds the 15 tokens of call 0"},
		{"negative shared", func(t *Trajectory) { t.Calls[1].PromptShared = -1 }, "prompt_shared -1"},
		{"logprobs length", func(t *Trajectory) { t.Calls[1].BehaviorLogprobs = zeros(4) }, "4 logprobs for 5"},
		{"loss mask length", func(t *Trajectory) { t.Calls[1].LossMask = []uint8{1} }, "loss mask of 1"},
		{"version runs", func(t *Trajectory) { t.Calls[1].VersionRuns = nil }, "cover 0 tokens"},
		{"bad role", func(t *Trajectory) { t.Messages[0].Role = "bot" }, "unknown role"},
		{"call index range", func(t *Trajectory) { t.Messages[1].CallIndex = 2 }, "call_index 2 out of range"},
		{"tool call name", func(t *Trajectory) { t.Messages[1].ToolCalls[0].Name = "" }, "empty name"},
		// Invalid UTF-8 anywhere breaks DuckDB for the whole archive (issue 13 item 4).
		{"utf8 id", func(t *Trajectory) { t.ID = "id-\xff" }, "id is not valid UTF-8"},
		{"utf8 task id", func(t *Trajectory) { t.TaskID = "task\xc3" }, "task_id is not valid UTF-8"},
		{"utf8 request id", func(t *Trajectory) { t.RequestID = "\xed\xa0\x80" }, "request_id is not valid UTF-8"},
		{"utf8 models", func(t *Trajectory) { t.UserModel = "gpt\xfe" }, "user_model is not valid UTF-8"},
		{"utf8 termination", func(t *Trajectory) { t.Termination = "\x80" }, "termination is not valid UTF-8"},
		{"utf8 reward info", func(t *Trajectory) { t.RewardInfoJSON = "{\"a\":\"\xff\"}" }, "reward_info_json is not valid UTF-8"},
		{"utf8 error", func(t *Trajectory) { t.Status, t.Error = StatusInfraError, "boom \xff" }, "error is not valid UTF-8"},
		{"utf8 basis", func(t *Trajectory) { t.RewardBasis = []string{"DB", "\xff"} }, "reward_basis[1] is not valid UTF-8"},
		{"utf8 tag key", func(t *Trajectory) { t.Tags = map[string]string{"\xff": "x"} }, "tag key is not valid UTF-8"},
		{"utf8 tag value", func(t *Trajectory) { t.Tags = map[string]string{"host": "\xff"} }, "tag value is not valid UTF-8"},
		{"utf8 content", func(t *Trajectory) { t.Messages[0].Content = "hello \xff world" }, "message 0 content is not valid UTF-8"},
		{"utf8 reasoning", func(t *Trajectory) { t.Messages[1].Reasoning = "\xc0\x80" }, "message 1 reasoning is not valid UTF-8"},
		{"utf8 tool call id", func(t *Trajectory) { t.Messages[1].ToolCallID = "\xff" }, "message 1 tool_call_id is not valid UTF-8"},
		{"utf8 tool arguments", func(t *Trajectory) { t.Messages[1].ToolCalls[0].Arguments = "{\"x\":\"\xff\"}" }, "message 1 tool call 0 arguments is not valid UTF-8"},
		{"utf8 tool name", func(t *Trajectory) { t.Messages[1].ToolCalls[0].Name = "get\xff" }, "message 1 tool call 0 name is not valid UTF-8"},
		{"utf8 finish reason", func(t *Trajectory) { t.Calls[1].FinishReason = "stop\xff" }, "call 1 finish_reason is not valid UTF-8"},
	}
	// Statuses other than ok that say why are valid: not_evaluated (1.1) and, the set being open,
	// a status of a newer minor.
	for _, st := range []Status{StatusNotEvaluated, "judge_pending"} {
		tr := validTrajectory()
		tr.Status, tr.Error, tr.Termination = st, "NL_ASSERTION not evaluated", TerminationUserStop
		if err := tr.Validate(); err != nil {
			t.Fatalf("status %s: %v", st, err)
		}
	}
	// The bounds themselves are valid rewards.
	for _, r := range []float64{MaxAbsReward, -MaxAbsReward, math.SmallestNonzeroFloat64} {
		tr := validTrajectory()
		tr.Reward, tr.ShapedReward, tr.Calls[0].ShapedReward = r, r, r
		if err := tr.Validate(); err != nil {
			t.Fatalf("reward %v: %v", r, err)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := validTrajectory()
			tc.mutate(tr)
			err := tr.Validate()
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestFullPromptRejectsBrokenChains(t *testing.T) {
	tests := []struct {
		name  string
		calls []LLMCall
		i     int
	}{
		{"out of range", nil, 0},
		{"forward ref", []LLMCall{{PromptRef: 1}, {PromptRef: -1}}, 0},
		{"root with shared", []LLMCall{{PromptRef: -1, PromptShared: 2}, {PromptRef: 0}}, 1},
		{"shared too long", []LLMCall{{PromptRef: -1, PromptTokens: seq(0, 2)}, {PromptRef: 0, PromptShared: 3}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Trajectory{Calls: tc.calls}
			if _, err := tr.FullPrompt(tc.i); !errors.Is(err, ErrInvalid) {
				t.Fatalf("FullPrompt err = %v", err)
			}
			if len(tc.calls) > 0 {
				if _, err := tr.FullPrompts(); !errors.Is(err, ErrInvalid) {
					t.Fatalf("FullPrompts err = %v", err)
				}
			}
		})
	}
}

func TestSyntheticIsValidAndDeterministic(t *testing.T) {
	o := DefaultSyntheticOptions()
	a := Synthetic(rand.New(rand.NewPCG(7, 7)), o)
	b := Synthetic(rand.New(rand.NewPCG(7, 7)), o)
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different trajectories")
	}
	if len(a.Calls) != o.Calls {
		t.Fatalf("%d calls", len(a.Calls))
	}
	last := a.PromptLen(len(a.Calls) - 1)
	if last < o.ContextTokens*3/4 || last > o.ContextTokens*5/4 {
		t.Fatalf("final context %d, want about %d", last, o.ContextTokens)
	}
	if a.Tags["source"] != "synthetic" {
		t.Fatal("synthetic trajectories must be tagged")
	}
}

// TestSyntheticTokenDistributions checks both token-id laws: valid ids, and the shape that
// matters for compression (Zipf ids are mostly small, uniform ids are not).
func TestSyntheticTokenDistributions(t *testing.T) {
	for _, tc := range []struct {
		dist               string
		minSmall, maxSmall float64 // bounds on the fraction of ids below 1000
	}{
		{TokensUniform, 0, 0.05},
		{"", 0, 0.05},
		{TokensZipf, 0.5, 1},
	} {
		o := DefaultSyntheticOptions()
		o.TokenDistribution = tc.dist
		tr := Synthetic(rand.New(rand.NewPCG(3, 4)), o)
		if err := tr.Validate(); err != nil {
			t.Fatalf("%q: %v", tc.dist, err)
		}
		var small, all int
		for _, c := range tr.Calls {
			for _, ids := range [][]int32{c.PromptTokens, c.CompletionTokens} {
				for _, id := range ids {
					if id < 0 || id >= vocabSize {
						t.Fatalf("%q: token id %d outside the vocabulary", tc.dist, id)
					}
					if id < 1000 {
						small++
					}
					all++
				}
			}
		}
		if f := float64(small) / float64(all); f < tc.minSmall || f > tc.maxSmall {
			t.Errorf("%q: %.3f of %d ids below 1000, want [%v, %v]", tc.dist, f, all, tc.minSmall, tc.maxSmall)
		}
	}
	if err := ValidateTokenDistribution("zipf"); err != nil {
		t.Fatal(err)
	}
	if err := ValidateTokenDistribution("normal"); err == nil {
		t.Fatal("unknown distribution accepted")
	}
}
