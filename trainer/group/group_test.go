package group

import (
	"fmt"
	"testing"
	"time"

	"tau2rl/schemas"
)

func traj(id, domain, task string, version int64, status schemas.Status) *schemas.Trajectory {
	t := &schemas.Trajectory{ID: id, Domain: domain, TaskID: task, Split: "train", Status: status, PolicyVersionStart: version}
	if status == schemas.StatusInfraError {
		t.Error = "policy server down"
	}
	t.Calls = []schemas.LLMCall{{PromptRef: -1, PromptTokens: []int32{1}, CompletionTokens: []int32{2}, BehaviorLogprobs: []float32{-1},
		VersionRuns: schemas.UniformVersion(version, 1)}}
	return t
}

func ok(id, task string) *schemas.Trajectory { return traj(id, "airline", task, 3, schemas.StatusOK) }

// TestAddCompletesGroups: Size episodes of one task (domain + task id) complete a group; episodes
// that cannot be trained on (infra_error, not_evaluated) are not members but count toward Size,
// completing the group as Partial instead of leaving it to wait for Timeout.
func TestAddCompletesGroups(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Size = 3
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	notEvaluated := func(id string) *schemas.Trajectory {
		tr := traj(id, "airline", "1", 3, schemas.StatusNotEvaluated)
		tr.Error = "no NL-assertion judge"
		return tr
	}
	type step struct {
		tr       *schemas.Trajectory
		verdict  Verdict
		complete []string // member ids of a completed group
		excluded int      // its excluded episodes
	}
	steps := []step{
		{ok("a1", "1"), Accepted, nil, 0},
		{ok("b1", "2"), Accepted, nil, 0},
		{ok("a1", "1"), Duplicate, nil, 0},
		{traj("a2", "airline", "1", 3, schemas.StatusInfraError), InfraError, nil, 0},
		{traj("r1", "retail", "1", 3, schemas.StatusOK), Accepted, nil, 0}, // same task id, other domain
		{ok("a3", "1"), Accepted, []string{"a1", "a3"}, 1},                 // a1, a2 (excluded), a3
		{ok("a4", "1"), Accepted, nil, 0},                                  // starts the next group of task 1
		{ok("a5", "1"), Accepted, nil, 0},
		{ok("a6", "1"), Accepted, []string{"a4", "a5", "a6"}, 0},
		{notEvaluated("a7"), NotEvaluated, nil, 0},
		{notEvaluated("a8"), NotEvaluated, nil, 0},
		{traj("a9", "airline", "1", 3, schemas.StatusInfraError), InfraError, []string{}, 3}, // none trainable
		{ok("a10", "1"), Accepted, nil, 0},
		{traj("old", "airline", "1", 1, schemas.StatusOK), Stale, nil, 0},
	}
	for i, s := range steps {
		grp, v := g.Add(Member{Traj: s.tr, Handle: uint64(i)}, now, 4, 2)
		if v != s.verdict {
			t.Fatalf("step %d (%s): verdict %v, want %v", i, s.tr.ID, v, s.verdict)
		}
		if (grp != nil) != (s.complete != nil) {
			t.Fatalf("step %d (%s): completed %+v, want members %v", i, s.tr.ID, grp, s.complete)
		}
		if grp == nil {
			continue
		}
		ids := []string{}
		for _, m := range grp.Members {
			ids = append(ids, m.Traj.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(s.complete) || grp.Excluded != s.excluded {
			t.Fatalf("step %d: completed %v with %d excluded, want %v with %d", i, ids, grp.Excluded, s.complete, s.excluded)
		}
		if grp.Key != "airline/1" || grp.Partial != (len(ids) < cfg.Size) {
			t.Fatalf("step %d: group %+v", i, grp)
		}
	}
	if g.Pending() != 3 || g.OpenGroups() != 3 { // b1, r1, a10
		t.Fatalf("pending %d open %d", g.Pending(), g.OpenGroups())
	}
	if n := len(g.PendingMembers()); n != 3 {
		t.Fatalf("pending members %d", n)
	}
}

func TestStaleness(t *testing.T) {
	cases := []struct {
		start, token, trainer, maxOff int64
		stale                         bool
	}{
		{5, 5, 7, 2, false},
		{4, 4, 7, 2, true},
		{4, 6, 7, 2, false}, // judged by its oldest token, not by the start version
		{6, 4, 7, 2, true},
		{5, 6, 7, 2, false},
		{0, 0, 100, -1, false}, // disabled
	}
	for _, c := range cases {
		tr := traj("x", "airline", "1", c.start, schemas.StatusOK)
		tr.Calls[0].VersionRuns = schemas.UniformVersion(c.token, 1)
		got := c.maxOff >= 0 && IsStale(tr, c.trainer, c.maxOff)
		if got != c.stale {
			t.Errorf("%+v: stale %v", c, got)
		}
	}
}

func TestExpire(t *testing.T) {
	for _, c := range []struct {
		rule           string
		members        int
		ready, dropped int
	}{
		{OnTimeoutPartial, 3, 1, 0},
		{OnTimeoutPartial, 1, 0, 1}, // below min size
		{OnTimeoutDrop, 3, 0, 1},
	} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Size, cfg.MinSize, cfg.OnTimeout, cfg.Timeout = 8, 2, c.rule, time.Minute
			g, _ := New(cfg)
			t0 := time.Unix(1000, 0)
			for i := 0; i < c.members; i++ {
				g.Add(Member{Traj: ok(fmt.Sprint(i), "7")}, t0.Add(time.Duration(i)*time.Second), 3, 2)
			}
			g.Add(Member{Traj: ok("later", "8")}, t0.Add(50*time.Second), 3, 2)
			if r, d := g.Expire(t0.Add(59 * time.Second)); len(r)+len(d) != 0 {
				t.Fatal("expired before the timeout")
			}
			r, d := g.Expire(t0.Add(time.Minute))
			if len(r) != c.ready || len(d) != c.dropped {
				t.Fatalf("ready %d dropped %d", len(r), len(d))
			}
			if c.ready == 1 && !r[0].Partial {
				t.Fatal("partial group not marked")
			}
			if g.OpenGroups() != 1 || g.Pending() != 1 {
				t.Fatalf("open %d pending %d after expiry", g.OpenGroups(), g.Pending())
			}
		})
	}
}

func TestPrune(t *testing.T) {
	grp := &Group{Members: []Member{
		{Traj: traj("a", "airline", "1", 3, schemas.StatusOK)},
		{Traj: traj("b", "airline", "1", 5, schemas.StatusOK)},
		{Traj: traj("c", "airline", "1", 4, schemas.StatusOK)},
	}}
	stale := Prune(grp, 6, 1)
	if len(stale) != 2 || len(grp.Members) != 1 || grp.Members[0].Traj.ID != "b" {
		t.Fatalf("stale %v kept %v", stale, grp.Members)
	}
	if Prune(grp, 100, -1) != nil {
		t.Fatal("pruned with the check disabled")
	}
}

func TestRememberAndBoundedIDs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DedupeCapacity = 4
	g, _ := New(cfg)
	g.Remember("done")
	if _, v := g.Add(Member{Traj: ok("done", "1")}, time.Now(), 3, 2); v != Duplicate {
		t.Fatalf("remembered id: %v", v)
	}
	// The bound is lib/seen's: exactly the last DedupeCapacity ids. A copy of "done" after four
	// newer ids is no longer a duplicate (two generations of maps remembered it up to 2n−1 ids).
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, v := g.Add(Member{Traj: ok(id, "2")}, time.Now(), 3, 2); v == Duplicate {
			t.Fatalf("new id %s: %v", id, v)
		}
	}
	if _, v := g.Add(Member{Traj: ok("a", "2")}, time.Now(), 3, 2); v != Duplicate {
		t.Fatalf("id within the last %d: %v", cfg.DedupeCapacity, v)
	}
	if _, v := g.Add(Member{Traj: ok("done", "1")}, time.Now(), 3, 2); v == Duplicate {
		t.Fatal("remembered an id more than dedupe_capacity ids back")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Size = 0 },
		func(c *Config) { c.Timeout = 0 },
		func(c *Config) { c.OnTimeout = "keep" },
		func(c *Config) { c.MinSize = 9 },
		func(c *Config) { c.DedupeCapacity = 0 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if _, err := New(c); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

// TestOutsideVocabulary: any call's prompt or completion token outside [0, VocabSize) excludes
// the episode (counted toward its group's size), and a vocabulary of 0 checks nothing.
func TestOutsideVocabulary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vocab   int
		prompt  []int32
		compl   []int32
		verdict Verdict
	}{
		{"inside", 10, []int32{0, 9}, []int32{9}, Accepted},
		{"completion at vocab", 10, []int32{1}, []int32{10}, OutOfVocabulary},
		{"prompt above vocab", 10, []int32{151644}, []int32{2}, OutOfVocabulary},
		{"negative id", 10, []int32{-1}, []int32{2}, OutOfVocabulary},
		{"unchecked", 0, []int32{151644}, []int32{-5}, Accepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Size = 2
			cfg.VocabSize = tc.vocab
			g, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			tr := ok("x", "1")
			tr.Calls[0].PromptTokens, tr.Calls[0].CompletionTokens = tc.prompt, tc.compl
			tr.Calls[0].BehaviorLogprobs = make([]float32, len(tc.compl))
			if _, v := g.Add(Member{Traj: tr}, time.Unix(0, 0), 3, -1); v != tc.verdict {
				t.Fatalf("verdict %s, want %s", v, tc.verdict)
			}
			grp, v := g.Add(Member{Traj: ok("y", "1")}, time.Unix(0, 0), 3, -1)
			if v != Accepted || grp == nil {
				t.Fatalf("second episode: verdict %s, group %v: the first must count toward the group's size", v, grp)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.verdict == OutOfVocabulary]; grp.Excluded != want {
				t.Fatalf("excluded %d, want %d", grp.Excluded, want)
			}
		})
	}
	if err := (Config{Size: 1, Timeout: time.Second, OnTimeout: OnTimeoutPartial, MinSize: 1, DedupeCapacity: 1, VocabSize: -1}).Validate(); err == nil {
		t.Fatal("negative vocabulary size accepted")
	}
}
