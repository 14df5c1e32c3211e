package telecom

import (
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
)

// benchTasks runs init + gold replay + env assertions for every task per
// iteration and fails on any unmet assertion, so the benchmark doubles as
// the full-set (2285 tasks) gold check. Reported: ns per task.
func benchTasks(b *testing.B, split string) {
	tasks := loadSplit(b, split)
	if _, err := env.New(DomainManual, env.Options{}); err != nil { // load DBs once
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, t := range tasks {
			if err := goldTask(t); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tasks)), "ns/task")
}

func goldTask(t *data.Task) error {
	e, err := env.New(DomainManual, env.Options{})
	if err != nil {
		return err
	}
	if err := InitTask(e, t); err != nil {
		return err
	}
	flags, err := ReplayGold(e, t)
	if err != nil {
		return err
	}
	for i, f := range flags {
		if f {
			return &goldError{task: t.ID, what: "gold action " + t.EvaluationCriteria.Actions[i].Name + " errored"}
		}
	}
	res, err := CheckAssertions(e, t)
	if err != nil {
		return err
	}
	for _, r := range res {
		if !r.Met {
			return &goldError{task: t.ID, what: "assertion " + r.FuncName + " not met"}
		}
	}
	return nil
}

type goldError struct{ task, what string }

func (g *goldError) Error() string { return "telecom: task " + g.task + ": " + g.what }

// BenchmarkGoldBase: the 114 base tasks.
func BenchmarkGoldBase(b *testing.B) { benchTasks(b, "base") }

// BenchmarkGoldFull: all 2285 telecom tasks.
func BenchmarkGoldFull(b *testing.B) { benchTasks(b, "full") }

// BenchmarkNewEnvironment: one episode's environment (two DB copies + sync).
func BenchmarkNewEnvironment(b *testing.B) {
	d := realData(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewEnvironment(d, "p", DomainManual, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToolCall: a typical user tool call (tool + sync + serialization).
func BenchmarkToolCall(b *testing.B) {
	e, err := NewEnvironment(realData(b), "p", DomainManual, false)
	if err != nil {
		b.Fatal(err)
	}
	e.Call(env.User, "toggle_airplane_mode", "")
	b.ReportAllocs()
	for b.Loop() {
		if _, isErr := e.Call(env.Assistant, "get_details_by_id", `{"id": "L1002"}`); isErr {
			b.Fatal("error")
		}
	}
}
