package gpu

import (
	"fmt"
	"math"
)

// Learning-rate schedules (Optimizer.LRSchedule). The empty string is constant.
//
// The schedule lives here, beside the hyper-parameters it reads, but is applied by the trainers
// (trainer/step for GRPO, trainer/sft): they pass Optimizer.At(step, total) to Backend.Step, so
// every backend (gpu/cpu, gpu/cuda, gpu/dp over several ranks or hosts) gets the step's rate
// through the one argument it already takes per step, and the CUDA AdamW kernel reads it per
// launch. The schedule is a pure function of the step index, so a run resumed from a checkpoint
// at step s continues with the rate an uninterrupted run would have used.
const (
	ScheduleConstant = "constant"
	ScheduleCosine   = "cosine"
	ScheduleLinear   = "linear"
)

// decays reports whether the schedule decays towards min_lr_ratio over a known number of steps.
func (o Optimizer) decays() bool {
	return o.LRSchedule == ScheduleCosine || o.LRSchedule == ScheduleLinear
}

// validateSchedule checks the schedule keys on their own (Validate); ValidateSchedule checks them
// against the run's length.
func (o Optimizer) validateSchedule() error {
	switch o.LRSchedule {
	case "", ScheduleConstant, ScheduleCosine, ScheduleLinear:
	default:
		return fmt.Errorf("gpu: optimizer lr_schedule %q: want %s, %s or %s", o.LRSchedule, ScheduleConstant, ScheduleCosine, ScheduleLinear)
	}
	switch {
	case o.WarmupSteps < 0:
		return fmt.Errorf("gpu: optimizer warmup_steps %d must be ≥ 0", o.WarmupSteps)
	case !(o.MinLRRatio >= 0 && o.MinLRRatio <= 1):
		return fmt.Errorf("gpu: optimizer min_lr_ratio %v must be in [0,1]", o.MinLRRatio)
	}
	return nil
}

// ValidateSchedule checks the schedule against the run's total number of optimizer steps (0 =
// unbounded). A decaying schedule needs a bound, and needs steps left after the warm-up to decay
// over; what = the key that sets the total, named in the error so the user knows what to set.
func (o Optimizer) ValidateSchedule(total int64, what string) error {
	if err := o.validateSchedule(); err != nil {
		return err
	}
	if !o.decays() {
		return nil
	}
	switch {
	case total <= 0:
		return fmt.Errorf("gpu: optimizer lr_schedule %s decays over the run's steps, but %s is 0 (unbounded): set %s, or lr_schedule=constant",
			o.LRSchedule, what, what)
	case o.WarmupSteps >= total:
		return fmt.Errorf("gpu: optimizer warmup_steps %d leaves none of the run's %d steps (%s) to decay over (lr_schedule %s): lower warmup_steps",
			o.WarmupSteps, total, what, o.LRSchedule)
	}
	return nil
}

// LRAt returns the learning rate of the optimizer step with 0-based index step (the number of
// steps already taken) of a run of total steps:
//
//   - warm-up, step < warmup_steps: lr·(step+1)/warmup_steps, so the first step moves (a rate of
//     0 would waste it) and step warmup_steps−1 reaches lr;
//   - constant: lr afterwards (exactly lr when warmup_steps is 0: the behaviour without a
//     schedule, bit for bit);
//   - cosine: lr·(m + (1−m)·½(1+cos πp)), linear: lr·(1 − (1−m)·p), with m = min_lr_ratio and
//     p = (step − warmup_steps)/(total − warmup_steps) clamped to [0,1] — Hugging Face's
//     get_cosine_schedule_with_warmup and get_linear_schedule_with_warmup with a floor: the
//     first step after the warm-up runs at lr, and a step at or past total at lr·m.
//
// A decaying schedule with total ≤ warmup_steps (refused by ValidateSchedule) stays at lr.
func (o Optimizer) LRAt(step, total int64) float64 {
	step = max(step, 0)
	if step < o.WarmupSteps {
		return o.LR * float64(step+1) / float64(o.WarmupSteps)
	}
	if !o.decays() || total <= o.WarmupSteps {
		return o.LR
	}
	p := min(float64(step-o.WarmupSteps)/float64(total-o.WarmupSteps), 1)
	m := o.MinLRRatio
	if o.LRSchedule == ScheduleCosine {
		return o.LR * (m + (1-m)*0.5*(1+math.Cos(math.Pi*p)))
	}
	return o.LR * (1 - (1-m)*p)
}

// At returns the optimizer settings of step (0-based) of a run of total steps: LR is LRAt's, and
// the schedule keys are cleared (a constant schedule), so a backend, or a follower host receiving
// the settings over trainer/feed, applies exactly that rate and nothing else.
func (o Optimizer) At(step, total int64) Optimizer {
	o.LR = o.LRAt(step, total)
	o.LRSchedule, o.WarmupSteps, o.MinLRRatio = ScheduleConstant, 0, 0
	return o
}
