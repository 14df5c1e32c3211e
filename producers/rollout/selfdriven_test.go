package rollout_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"tau2rl/lib/stream"
	"tau2rl/producers/rollout"
	"tau2rl/schemas"
	"tau2rl/tau2/episode"
)

func TestRequestList(t *testing.T) {
	dir := needData(t)
	tasks := func(domain, split string) (*episode.TaskSet, error) { return episode.LoadTasks(dir, domain, split) }
	train, err := tasks("airline", "train")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(*rollout.SelfDrivenConfig)
		n    int
		ids  []string
		err  string
	}{
		{name: "whole split", edit: func(*rollout.SelfDrivenConfig) {}, n: len(train.Tasks)},
		{name: "limit", edit: func(c *rollout.SelfDrivenConfig) { c.Limit = 3 }, n: 3, ids: []string{train.Tasks[0].ID, train.Tasks[1].ID, train.Tasks[2].ID}},
		{name: "task ids in order", edit: func(c *rollout.SelfDrivenConfig) { c.TaskIDs = []string{train.Tasks[4].ID, train.Tasks[1].ID} }, n: 2,
			ids: []string{train.Tasks[4].ID, train.Tasks[1].ID}},
		{name: "unknown task", edit: func(c *rollout.SelfDrivenConfig) { c.TaskIDs = []string{"no-such-task"} }, err: "no task"},
		{name: "unknown split", edit: func(c *rollout.SelfDrivenConfig) { c.Split = "nope" }, err: "nope"},
		{name: "explicit domain", edit: func(c *rollout.SelfDrivenConfig) { c.Domain, c.Split = "mock", "base" }, n: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := rollout.DefaultSelfDrivenConfig()
			cfg.Enabled, cfg.Trials = true, 3
			c.edit(&cfg)
			l, err := rollout.NewRequestList(cfg, "airline", tasks, 7)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.n >= 0 && l.Len() != c.n {
				t.Fatalf("%d requests, want %d", l.Len(), c.n)
			}
			var got []string
			for {
				m, err := l.Fetch(context.Background())
				if errors.Is(err, rollout.ErrRequestsDone) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				var req schemas.RolloutRequest
				if err := schemas.UnframeControl(m.Value, stream.HeaderMap(m), &req); err != nil {
					t.Fatal(err)
				}
				if req.GroupSize != 3 || req.PolicyVersion != 7 || req.Domain != cfg.Domain && !(cfg.Domain == "" && req.Domain == "airline") {
					t.Fatalf("request %+v", req)
				}
				got = append(got, req.TaskID)
			}
			if len(got) != l.Len() {
				t.Fatalf("fetched %d of %d", len(got), l.Len())
			}
			for i, id := range c.ids {
				if got[i] != id {
					t.Fatalf("tasks %v, want %v first", got, c.ids)
				}
			}
		})
	}
}
