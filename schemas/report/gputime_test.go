package report

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestSummarizeTimeline: testdata/gputime.jsonl (one sampler, the trainer, the producer and a GPU
// over 4 s) summarises to the shares and rates worked out by hand.
func TestSummarizeTimeline(t *testing.T) {
	f, err := os.Open("testdata/gputime.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := ReadTimeline(f)
	if err != nil {
		t.Fatal(err)
	}
	g := SummarizeTimeline(samples)
	if g.WallSeconds != 4 || len(g.Roles) != 3 || len(g.GPUs) != 1 {
		t.Fatalf("summary %+v", g)
	}
	want := []struct {
		role  string
		busy  map[string]float64
		idle  float64
		per_s map[string]float64
	}{
		{RoleSampler, map[string]float64{"decode": 0.375, "prefill": 0.075, "mixed": 0.075, "weight_update": 0.05}, 0.425,
			map[string]float64{CountCalls: 4, CountGeneratedTokens: 200, CountPromptTokens: 1750}},
		// waiting is not GPU work: idle = 1 − (train + recompute + checkpoint + weight_sync).
		{RoleTrainer, map[string]float64{"train": 0.25, "recompute": 0.05, "checkpoint": 0.05, "weight_sync": 0.05, "waiting": 0.55}, 0.6,
			map[string]float64{CountSteps: 0.25}},
		{RoleProducer, nil, 0, map[string]float64{CountEpisodes: 1, CountCalls: 4, CountGeneratedTokens: 200, CountEpisodeSeconds: 8, CountAgentSeconds: 2}},
	}
	for i, w := range want {
		r := g.Roles[i]
		if r.Role != w.role || r.WallSeconds != 4 || !near(r.IdleShare, w.idle) || len(r.BusyShare) != len(w.busy) || len(r.PerSecond) != len(w.per_s) {
			t.Errorf("role %d: %+v, want %+v", i, r, w)
			continue
		}
		for p, v := range w.busy {
			if !near(r.BusyShare[p], v) {
				t.Errorf("%s %s share %v, want %v", r.Role, p, r.BusyShare[p], v)
			}
		}
		for k, v := range w.per_s {
			if !near(r.PerSecond[k], v) {
				t.Errorf("%s %s/s %v, want %v", r.Role, k, r.PerSecond[k], v)
			}
		}
	}
	gpu := g.GPUs[0]
	if gpu.Index != "0" || gpu.Card != "NVIDIA H100 80GB HBM3" || gpu.MeanUtil != 65 || gpu.MaxMemMiB != 3000 || gpu.Samples != 4 {
		t.Errorf("gpu %+v", gpu)
	}
	l := g.Loop
	if !near(l.EpisodesPerS, 1) || !near(l.CallsPerS, 4) || !near(l.GenTokPerS, 200) || !near(l.SyncShare, 0.05) || !near(l.CheckpointShare, 0.05) {
		t.Errorf("loop %+v", l)
	}
	// Little's law: 32 episode-seconds in 4 s is 8 episodes in flight on average, 8 agent-call
	// seconds 2 calls; an episode has a call on the sampler a quarter of its time.
	if !near(l.EpisodesInFlight, 8) || !near(l.CallsInFlight, 2) || !near(l.OnSamplerShare, 0.25) {
		t.Errorf("in flight: %+v", l)
	}
	if !near(g.IdleShare(RoleSampler), 0.425) || g.IdleShare("none") != 0 {
		t.Errorf("idle share by role: %v", g.IdleShare(RoleSampler))
	}
}

// TestSummarizeRestartedCounter: a process that restarts mid-stage starts its counters again
// from 0; what it did after the restart counts, the drop does not make time negative.
func TestSummarizeRestartedCounter(t *testing.T) {
	s := func(ts, decode float64) TimelineSample {
		return TimelineSample{T: ts, Role: RoleSampler, Name: "a", Busy: map[string]float64{"decode": decode}}
	}
	g := SummarizeTimeline([]TimelineSample{s(0, 5), s(2, 6), s(4, 0.5), s(6, 1.5)})
	if r := g.Roles[0]; !near(r.BusyShare["decode"], 2.5/6) || !near(r.IdleShare, 1-2.5/6) {
		t.Fatalf("%+v", r)
	}
}

func TestReadTimeline(t *testing.T) {
	good := `{"t":0,"role":"trainer","name":"trainer"}` + "\n"
	for _, c := range []struct {
		name, in string
		n        int
		err      string
	}{
		{"empty", "", 0, ""},
		{"torn last line skipped", good + `{"t":1,"ro`, 1, ""},
		{"malformed line in the middle", good + "{oops}\n" + good, 0, "line 2"},
		{"no role", `{"t":1}` + "\n", 0, "needs a role"},
		{"blank lines", "\n" + good + "\n", 1, ""},
	} {
		got, err := ReadTimeline(strings.NewReader(c.in))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.name, err, c.err)
		case c.err == "" && (err != nil || len(got) != c.n):
			t.Errorf("%s: %d samples, %v; want %d", c.name, len(got), err, c.n)
		}
	}
}

// FuzzReadTimeline: gputime.jsonl is read back from disk after a run that may have been killed
// or edited; the reader errs or returns samples, never panics, and the summary of what it
// returns has shares in [0, 1].
func FuzzReadTimeline(f *testing.F) {
	b, err := os.ReadFile("testdata/gputime.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"t":1e308,"role":"sampler","name":"x","busy_s":{"decode":-1}}` + "\n" + `{"t":-1e308,"role":"sampler","name":"x"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		samples, err := ReadTimeline(bytes.NewReader(in))
		if err != nil {
			return
		}
		g := SummarizeTimeline(samples)
		for _, r := range g.Roles {
			if r.IdleShare < 0 || r.IdleShare > 1 || math.IsNaN(r.IdleShare) {
				t.Fatalf("idle share %v", r.IdleShare)
			}
		}
	})
}
