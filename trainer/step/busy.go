package step

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Where the trainer's wall time goes (issue 29's "GPU time accounted for"), as
// tau2rl_trainer_busy_seconds_total{phase}:
//
//	train        a step's batch building, packing, forward/backward passes and optimizer steps
//	recompute    the proximal log-probs (actor.recompute_logprob)
//	checkpoint   writing the checkpoint (weights, optimizer state, trainer state)
//	weight_sync  the inference servers' reload of a new version (the Reloader call, failed ones
//	             included) and the version's publication
//	waiting      blocked for the next message or tick with no step to take: waiting for a batch
//
// The rest of the wall clock (grouping, admission, offset commits, logging) is the trainer's
// own overhead, which a report shows as "other". On the disk reload path every reload needs its
// checkpoint written first, so checkpoint + weight_sync is what getting weights to the samplers
// costs; with a path that needs no disk round trip, checkpoint is only the durability the run
// asked for (checkpoint.every).
const (
	BusyTrain      = "train"
	BusyRecompute  = "recompute"
	BusyCheckpoint = "checkpoint"
	BusyWeightSync = "weight_sync"
	BusyWaiting    = "waiting"
)

// BusyPhases lists the trainer's phases in a fixed order (the report's shares, the figure's
// bands).
var BusyPhases = []string{BusyTrain, BusyRecompute, BusyCheckpoint, BusyWeightSync, BusyWaiting}

// busyOf maps the step phases of tau2rl_trainer_phase_seconds onto the busy phases.
var busyOf = map[string]string{
	"build": BusyTrain, "pack": BusyTrain, "train": BusyTrain, "prox": BusyRecompute,
	"checkpoint": BusyCheckpoint, "reload": BusyWeightSync, "publish": BusyWeightSync,
}

func newBusySeconds() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tau2rl_trainer", Name: "busy_seconds_total",
		Help: "Trainer wall time by phase: train, recompute, checkpoint, weight_sync, waiting (for a batch); the rest is the trainer's overhead."},
		[]string{"phase"})
	for _, p := range BusyPhases { // every phase is exported from the start, also at 0
		c.WithLabelValues(p)
	}
	return c
}

// phase records a step phase that began at since: its tau2rl_trainer_phase_seconds histogram
// and the busy phase it belongs to.
func (t *Trainer) phase(name string, since time.Time) {
	d := time.Since(since).Seconds()
	if name != "publish" { // publish is only counted as busy (no histogram of its own before)
		t.d.Metrics.PhaseSeconds.WithLabelValues(name).Observe(d)
	}
	t.d.Metrics.BusySeconds.WithLabelValues(busyOf[name]).Add(d)
}

// waited counts time blocked in Run's select as waiting.
func (t *Trainer) waited(since time.Time) {
	t.d.Metrics.BusySeconds.WithLabelValues(BusyWaiting).Add(time.Since(since).Seconds())
}
