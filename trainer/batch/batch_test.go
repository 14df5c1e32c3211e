package batch

import (
	"math"
	"slices"
	"testing"

	"tau2rl/schemas"
	"tau2rl/trainer/advantage"
	"tau2rl/trainer/group"
)

// episode builds a trajectory of three calls: call 1's prompt extends call 0 token-exactly,
// call 2's prompt re-renders the history (drops call 1's completion head), as Qwen3 does with
// thinking blocks.
func episode(t *testing.T, id string, reward float64, version int64) *schemas.Trajectory {
	tr := &schemas.Trajectory{ID: id, TaskID: "5", Domain: "airline", Split: "train", Status: schemas.StatusOK, Reward: reward, ShapedReward: reward}
	calls := []schemas.CallInput{
		{Prompt: []int32{10, 11, 12}, Completion: []int32{20, 21}, BehaviorLogprobs: []float32{-0.1, -0.2}, Version: version, ShapedReward: 0.5 * reward},
		{Prompt: []int32{10, 11, 12, 20, 21, 30}, Completion: []int32{22, 23, 24}, BehaviorLogprobs: []float32{-0.3, -0.4, -0.5}, Version: version,
			LossMask: []uint8{1, 0, 1}, ShapedReward: 0.75 * reward},
		{Prompt: []int32{10, 11, 12, 21, 30, 24, 31}, Completion: []int32{25}, BehaviorLogprobs: []float32{-0.6}, Version: version - 1, ShapedReward: reward},
	}
	for _, c := range calls {
		if _, err := tr.AppendCall(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	return tr
}

func testGroup(t *testing.T) *group.Group {
	return &group.Group{Key: "airline/5", Members: []group.Member{{Traj: episode(t, "a", 1, 3)}, {Traj: episode(t, "b", 0, 3)}}}
}

func TestBuildPerCall(t *testing.T) {
	adv := advantage.DefaultConfig()
	adv.NormStd = false
	b, err := Build([]*group.Group{testGroup(t)}, adv, DefaultConfig(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Seqs) != 6 {
		t.Fatalf("%d sequences, want 6", len(b.Seqs))
	}
	s := b.Seqs[1] // member a, call 1
	if !slices.Equal(s.Tokens, []int32{10, 11, 12, 20, 21, 30, 22, 23, 24}) {
		t.Fatalf("tokens %v", s.Tokens)
	}
	if !slices.Equal(s.Loss, []bool{false, false, false, false, false, false, true, false, true}) {
		t.Fatalf("loss mask %v", s.Loss)
	}
	l := b.Loss[1]
	if l.Offset != 6 || !slices.Equal(l.Behav, []float32{-0.3, 0, -0.5}) || !slices.Equal(l.Adv, []float32{0.5, 0, 0.5}) {
		t.Fatalf("loss seq %+v", l)
	}
	if b.Info[4] != (SeqInfo{Group: 0, Member: 1, FirstCall: 1, Calls: 1}) {
		t.Fatalf("info %+v", b.Info[4])
	}
	if b.Loss[5].Adv[0] != -0.5 {
		t.Fatalf("member b advantage %v", b.Loss[5].Adv)
	}
	// loss tokens: 2 + 2 + 1 per member; staleness: call 2 is from version 2 → 2, others 1.
	if b.LossTokens != 10 || b.MaxStaleness != 2 || b.StalenessSum != 2*(4*1+2) {
		t.Fatalf("loss tokens %d max staleness %d sum %d", b.LossTokens, b.MaxStaleness, b.StalenessSum)
	}
}

func TestBuildConversation(t *testing.T) {
	adv := advantage.DefaultConfig()
	adv.NormStd = false
	cfg := Config{SequenceMode: ModeConversation, RewardSource: RewardShaped}
	b, err := Build([]*group.Group{testGroup(t)}, adv, cfg, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	// calls 0+1 merge (token-exact), call 2 does not.
	if len(b.Seqs) != 4 {
		t.Fatalf("%d sequences, want 4", len(b.Seqs))
	}
	s, l := b.Seqs[0], b.Loss[0]
	if !slices.Equal(s.Tokens, []int32{10, 11, 12, 20, 21, 30, 22, 23, 24}) ||
		!slices.Equal(s.Loss, []bool{false, false, false, true, true, false, true, false, true}) {
		t.Fatalf("merged sequence %+v", s)
	}
	// Shaped source, baseline = mean episode shaped reward 0.5; call 0 shaped 0.5 → 0,
	// call 1 shaped 0.75 → 0.25.
	if l.Offset != 3 || !slices.Equal(l.Adv, []float32{0, 0, 0, 0.25, 0, 0.25}) ||
		!slices.Equal(l.Behav, []float32{-0.1, -0.2, 0, -0.3, 0, -0.5}) {
		t.Fatalf("merged loss %+v", l)
	}
	if b.Info[0].Calls != 2 || b.Info[1].FirstCall != 2 {
		t.Fatalf("info %+v", b.Info)
	}
	if math.Abs(b.Advantages[0][1][2]-(-0.5)) > 1e-12 {
		t.Fatalf("advantages %v", b.Advantages)
	}
}

func TestBuildSkipsUntrained(t *testing.T) {
	g := testGroup(t)
	for _, m := range g.Members {
		for k := range m.Traj.Calls {
			m.Traj.Calls[k].LossMask = make([]uint8, len(m.Traj.Calls[k].CompletionTokens))
		}
	}
	b, err := Build([]*group.Group{g}, advantage.DefaultConfig(), DefaultConfig(), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Seqs) != 0 || b.LossTokens != 0 {
		t.Fatalf("untrained calls produced %d sequences", len(b.Seqs))
	}
}

func TestBuildErrors(t *testing.T) {
	if _, err := Build(nil, advantage.DefaultConfig(), Config{SequenceMode: "tree", RewardSource: RewardTau2}, 0, 0); err == nil {
		t.Fatal("bad mode accepted")
	}
	g := testGroup(t)
	g.Members[0].Traj.Calls[1].PromptRef = 2 // forward reference
	if _, err := Build([]*group.Group{g}, advantage.DefaultConfig(), DefaultConfig(), 3, 0); err == nil {
		t.Fatal("malformed prompt chain accepted")
	}
	g = testGroup(t)
	g.Members[0].Traj.Reward = math.Inf(1)
	if _, err := Build([]*group.Group{g}, advantage.DefaultConfig(), DefaultConfig(), 3, 0); err == nil {
		t.Fatal("infinite reward accepted")
	}
}

func TestBuildDropsOversize(t *testing.T) {
	adv := advantage.DefaultConfig()
	// Calls are 5, 9 and 8 tokens long: with a limit of 8 call 1 is dropped in call mode; in
	// conversation mode calls 0 and 1 are not merged (9 > 8) and call 1 is dropped.
	for _, mode := range []string{ModeCall, ModeConversation} {
		b, err := Build([]*group.Group{testGroup(t)}, adv, Config{SequenceMode: mode, RewardSource: RewardTau2}, 3, 8)
		if err != nil {
			t.Fatal(err)
		}
		if b.Oversize != 2 || len(b.Seqs) != 4 {
			t.Fatalf("%s: oversize %d, %d sequences", mode, b.Oversize, len(b.Seqs))
		}
		for _, s := range b.Seqs {
			if len(s.Tokens) > 8 {
				t.Fatalf("%s: sequence of %d tokens kept", mode, len(s.Tokens))
			}
		}
	}
}

func TestBuildDropsInvalidLogprobs(t *testing.T) {
	g := testGroup(t)
	g.Members[0].Traj.Calls[0].BehaviorLogprobs[1] = float32(math.NaN())
	g.Members[1].Traj.Calls[2].BehaviorLogprobs[0] = 0.5
	b, err := Build([]*group.Group{g}, advantage.DefaultConfig(), DefaultConfig(), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.InvalidLogprobs != 2 || len(b.Seqs) != 4 {
		t.Fatalf("invalid %d, %d sequences", b.InvalidLogprobs, len(b.Seqs))
	}
	// A masked token's log-prob does not matter.
	g = testGroup(t)
	g.Members[0].Traj.Calls[1].BehaviorLogprobs[1] = float32(math.Inf(-1)) // loss mask 0 there
	if b, _ = Build([]*group.Group{g}, advantage.DefaultConfig(), DefaultConfig(), 3, 0); b.InvalidLogprobs != 0 {
		t.Fatal("masked token's log-prob rejected the call")
	}
}

// TestStalenessLeavesOutTokensAheadOfTrainer: a loss token whose version is newer than the
// trainer's (a server that was never reloaded with the trainer's numbering: one started from an
// SFT checkpoint at step 557 reports 557 to a trainer at 0) is counted as ahead, not averaged
// into the staleness as a negative lag. Before, such a step logged staleness_mean −557.
func TestStalenessLeavesOutTokensAheadOfTrainer(t *testing.T) {
	// testGroup: per member, 4 loss tokens of calls 0-1 at version 3 and 1 of call 2 at version 2.
	for _, tc := range []struct {
		name                string
		version             int64
		sum, tokens, maxLag int64
		ahead, maxAhead     int64
		mean                float64
	}{
		{name: "all behind", version: 4, sum: 2 * (4*1 + 2), tokens: 10, maxLag: 2, mean: 1.2},
		{name: "current", version: 3, sum: 2 * 1, tokens: 10, maxLag: 1, mean: 0.2},
		{name: "some ahead", version: 2, sum: 0, tokens: 2, maxLag: 0, ahead: 8, maxAhead: 1, mean: 0},
		{name: "all ahead (fresh trainer, unreloaded server)", version: 0, ahead: 10, maxAhead: 3, mean: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Build([]*group.Group{testGroup(t)}, advantage.DefaultConfig(), DefaultConfig(), tc.version, 0)
			if err != nil {
				t.Fatal(err)
			}
			if b.LossTokens != 10 {
				t.Fatalf("%d loss tokens, want 10", b.LossTokens)
			}
			if b.StalenessSum != tc.sum || b.StalenessTokens != tc.tokens || b.MaxStaleness != tc.maxLag ||
				b.AheadTokens != tc.ahead || b.MaxAhead != tc.maxAhead {
				t.Fatalf("staleness sum %d over %d tokens, max %d; ahead %d (max %d); want %d over %d, max %d; ahead %d (max %d)",
					b.StalenessSum, b.StalenessTokens, b.MaxStaleness, b.AheadTokens, b.MaxAhead, tc.sum, tc.tokens, tc.maxLag, tc.ahead, tc.maxAhead)
			}
			if m := b.StalenessMean(); math.Abs(m-tc.mean) > 1e-12 || m < 0 {
				t.Fatalf("staleness mean %v, want %v", m, tc.mean)
			}
		})
	}
}
