package evaluator_test

import (
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/evaluator/goldgen"
	"tau2rl/tau2/tau2test"
)

// benchRuns builds one gold transcript per task (telecom: all 2285 tasks).
func benchRuns(b *testing.B, domain string) []*goldgen.Run {
	b.Helper()
	dir := tau2test.DataDir(b)
	if !registered(domain) {
		b.Skipf("domain %s is not registered in this build", domain)
	}
	tasks, err := data.LoadTasks(dir, domain, data.Head)
	if err != nil {
		b.Fatal(err)
	}
	g := &goldgen.Generator{Domain: domain, DataDir: dir}
	runs := make([]*goldgen.Run, 0, len(tasks))
	for _, t := range tasks {
		r, err := g.Build(t, goldgen.Gold, 0)
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}

// BenchmarkGrade measures grading one simulation (gold transcript, every
// task in turn) on one goroutine with a fresh Grader per simulation, so
// the gold replay is included — what τ²'s evaluate_simulation does per
// simulation (reference: ~1.0 s airline, 0.47 s retail, 0.03 s telecom).
func BenchmarkGrade(b *testing.B) {
	for _, domain := range []string{"airline", "retail", "telecom", "mock"} {
		b.Run(domain, func(b *testing.B) {
			runs := benchRuns(b, domain)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := runs[i%len(runs)]
				g, err := evaluator.NewGrader(evaluator.Options{Domain: domain})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := g.Evaluate(ctx, r.Task, r.Messages, r.Termination); err != nil && domain != "mock" {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRegrade measures `tau2-eval grade`'s core end to end on an
// in-memory results file (parse, grade on all cores, rewrite): per
// simulation, 4 trials per task.
func BenchmarkRegrade(b *testing.B) {
	for _, domain := range []string{"airline", "retail", "telecom"} {
		b.Run(domain, func(b *testing.B) {
			dir := tau2test.DataDir(b)
			runs := benchRuns(b, domain)
			var all []*goldgen.Run
			var tasks []*data.Task
			for _, r := range runs {
				tasks = append(tasks, r.Task)
				for trial := 0; trial < 4; trial++ {
					rr := *r
					rr.Trial = trial
					rr.ID = goldgen.RunID(domain, r.Task.ID, r.Variant, trial)
					all = append(all, &rr)
				}
			}
			g := &goldgen.Generator{Domain: domain, DataDir: dir}
			file, err := g.Results(tasks, all, 4)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(file)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := evaluator.ParseResults(file)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := evaluator.Regrade(ctx, r, evaluator.RegradeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(all)), "ns/sim")
		})
	}
}
