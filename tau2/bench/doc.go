// Package bench is τ²-bench's evaluation protocol in Go, what `tau2-eval` runs: Run plays every
// task of a split k times against a policy (token or chat mode) with the user simulator, grades
// each episode and writes τ²'s results file (Results{timestamp, info, tasks, simulations}) and
// pass^k; Grade re-grades a results file with the Go evaluator (and an NL-assertion judge);
// Synth writes a results file of gold-action transcripts. The command parses flags and calls
// it; the tests call it directly.
package bench

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Deps are what the command hands an evaluation.
type Deps struct {
	// Log receives the progress (nil discards).
	Log *slog.Logger
	// Registry takes the inference clients' metrics (nil: unregistered, lib/metrics).
	Registry prometheus.Registerer
	// Ready, when set, is called once the evaluation is about to start (the process's readiness).
	Ready func()
}

func (d Deps) ready() {
	if d.Ready != nil {
		d.Ready()
	}
}
