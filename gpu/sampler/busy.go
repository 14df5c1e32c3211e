package sampler

import "time"

// Where the engine's wall time goes (issue 29's "GPU time accounted for"). The Run goroutine
// attributes every decoder step, from building its inputs to applying its draws, to one phase
// by what the step held:
//
//	decode         only decode tokens (one token of a request that has output already)
//	prefill        only prefill chunks (prompt tokens, recomputed KV after a retraction or a
//	               weight update, the last prompt token after a prefix-cache hit)
//	mixed          both (continuous batching puts prefill chunks beside the decode tokens)
//	weight_update  a weight swap between two steps (SwapWeights: load into the decoder,
//	               retract, flush the prefix cache), and the time generation is held by a pause
//	               (/pause, /pause_generation: the RL weight-transfer protocols hold the engine
//	               around the swap); a hold is counted when it ends
//
// The rest of the wall clock is idle: nothing to run, or the engine's own scheduling between
// steps (microseconds). Decoding is memory-bound, so a decode-only step's time grows little
// with its batch; a run whose decode steps hold few sequences is idle in all but name: read the
// busy shares beside tau2rl_sampler_running_requests.

// Busy phases, as Prometheus label values (tau2rl_sampler_busy_seconds_total{phase}).
const (
	PhaseDecode       = "decode"
	PhasePrefill      = "prefill"
	PhaseMixed        = "mixed"
	PhaseWeightUpdate = "weight_update"
)

// BusyPhases lists the phases in a fixed order (the figures' bands, the report's shares).
var BusyPhases = []string{PhaseDecode, PhasePrefill, PhaseMixed, PhaseWeightUpdate}

// BusyTime is the engine's cumulative time per phase since it was built.
type BusyTime struct {
	Decode, Prefill, Mixed, WeightUpdate time.Duration
}

// Total is the time busy in any phase.
func (b BusyTime) Total() time.Duration { return b.Decode + b.Prefill + b.Mixed + b.WeightUpdate }

// Steps is the time in decoder steps (every phase but weight_update).
func (b BusyTime) Steps() time.Duration { return b.Decode + b.Prefill + b.Mixed }

func (b *BusyTime) add(phase string, d time.Duration) {
	switch phase {
	case PhaseDecode:
		b.Decode += d
	case PhasePrefill:
		b.Prefill += d
	case PhaseMixed:
		b.Mixed += d
	case PhaseWeightUpdate:
		b.WeightUpdate += d
	}
}

// stepPhase classifies a step's batch: a work item is a decode token when it feeds one token of
// a request that has sampled before (a rejected draw's re-feed included), a prefill chunk
// otherwise.
func stepPhase(batch []work) string {
	var decode, prefill bool
	for _, w := range batch {
		if w.chunk == 1 && w.s.draws > 0 {
			decode = true
		} else {
			prefill = true
		}
	}
	switch {
	case decode && prefill:
		return PhaseMixed
	case decode:
		return PhaseDecode
	default:
		return PhasePrefill
	}
}

// busy attributes d to phase (Run goroutine only).
func (e *Engine) busy(phase string, d time.Duration) {
	e.busyTime.add(phase, d)
	e.met.busy(phase, d)
}

// noteHold starts or ends the count of a hold (Run goroutine only; called after anything that
// may change e.pause). A hold counts as weight_update time.
func (e *Engine) noteHold() {
	switch held := e.pause == pauseHold; {
	case held && e.holdSince.IsZero():
		e.holdSince = time.Now()
	case !held && !e.holdSince.IsZero():
		e.busy(PhaseWeightUpdate, time.Since(e.holdSince))
		e.holdSince = time.Time{}
	}
}
