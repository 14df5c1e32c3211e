package gpu

import (
	"math"
	"strings"
	"testing"
)

func TestLRAt(t *testing.T) {
	opt := func(sched string, warmup int64, floor float64) Optimizer {
		o := DefaultOptimizer()
		o.LR, o.LRSchedule, o.WarmupSteps, o.MinLRRatio = 1, sched, warmup, floor
		return o
	}
	for _, c := range []struct {
		name        string
		o           Optimizer
		total       int64
		steps       []int64
		want        []float64
		description string
	}{
		{"constant", opt(ScheduleConstant, 0, 0), 0, []int64{0, 1, 1000}, []float64{1, 1, 1}, "lr at every step"},
		{"empty is constant", opt("", 0, 0.5), 10, []int64{0, 9, 20}, []float64{1, 1, 1}, "min_lr_ratio ignored"},
		{"constant warm-up", opt(ScheduleConstant, 4, 0), 0, []int64{0, 1, 3, 4, 100}, []float64{0.25, 0.5, 1, 1, 1}, "linear from lr/4"},
		{"cosine", opt(ScheduleCosine, 0, 0), 4, []int64{0, 1, 2, 3, 4, 9}, []float64{1, 0.5 + 0.5*math.Cos(math.Pi/4), 0.5, 0.5 + 0.5*math.Cos(3*math.Pi/4), 0, 0}, "½(1+cos πk/T)"},
		{"cosine floor", opt(ScheduleCosine, 0, 0.1), 2, []int64{0, 1, 2}, []float64{1, 0.55, 0.1}, "m + (1−m)·½(1+cos πp)"},
		{"cosine warm-up", opt(ScheduleCosine, 2, 0), 6, []int64{0, 1, 2, 4, 6}, []float64{0.5, 1, 1, 0.5, 0}, "warm-up then decay over total−warmup"},
		{"linear", opt(ScheduleLinear, 0, 0), 4, []int64{0, 1, 2, 3, 4, 5}, []float64{1, 0.75, 0.5, 0.25, 0, 0}, "1 − p"},
		{"linear floor warm-up", opt(ScheduleLinear, 1, 0.2), 5, []int64{0, 1, 3, 5}, []float64{1, 1, 0.6, 0.2}, "1 − 0.8p"},
		{"negative step", opt(ScheduleLinear, 0, 0), 4, []int64{-3}, []float64{1}, "treated as step 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i, s := range c.steps {
				if got := c.o.LRAt(s, c.total); math.Abs(got-c.want[i]) > 1e-12 {
					t.Errorf("%s: LRAt(%d, %d) = %v, want %v", c.description, s, c.total, got, c.want[i])
				}
			}
		})
	}
}

// TestConstantScheduleIsTheOldOptimizer: with the default schedule every step's settings are the
// configured ones, bit for bit, so a run that sets no schedule key trains exactly as before the
// schedule existed.
func TestConstantScheduleIsTheOldOptimizer(t *testing.T) {
	o := DefaultOptimizer()
	o.LR = 3.7e-5
	old := Optimizer{LR: o.LR, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay, MaxGradNorm: o.MaxGradNorm, LRSchedule: ScheduleConstant}
	for _, sched := range []string{"", ScheduleConstant} {
		o.LRSchedule = sched
		for _, step := range []int64{0, 1, 17, 1 << 40} {
			for _, total := range []int64{0, 5, 1 << 41} {
				if got := o.At(step, total); got != old || math.Float64bits(got.LR) != math.Float64bits(old.LR) {
					t.Fatalf("schedule %q: At(%d, %d) = %+v, want %+v", sched, step, total, got, old)
				}
			}
		}
	}
}

// TestAtClearsTheSchedule: what a backend (or a follower host) receives is a constant rate.
func TestAtClearsTheSchedule(t *testing.T) {
	o := DefaultOptimizer()
	o.LR, o.LRSchedule, o.WarmupSteps, o.MinLRRatio = 1, ScheduleCosine, 2, 0.1
	a := o.At(3, 10)
	if a.LRSchedule != ScheduleConstant || a.WarmupSteps != 0 || a.MinLRRatio != 0 || a.LR != o.LRAt(3, 10) {
		t.Fatalf("At = %+v", a)
	}
	if a.At(5, 10).LR != a.LR {
		t.Fatal("a resolved optimizer is not constant")
	}
}

func TestValidateSchedule(t *testing.T) {
	base := DefaultOptimizer()
	for _, c := range []struct {
		sched  string
		warmup int64
		floor  float64
		total  int64
		want   string // "" = valid
	}{
		{"", 0, 0, 0, ""},
		{ScheduleConstant, 10, 0, 0, ""},
		{ScheduleConstant, 10, 0, 5, ""}, // a constant rate needs no steps to decay over
		{ScheduleCosine, 0, 0, 100, ""},
		{ScheduleLinear, 99, 1, 100, ""},
		{ScheduleCosine, 0, 0, 0, "max_steps is 0 (unbounded): set max_steps, or lr_schedule=constant"},
		{ScheduleLinear, 0, 0, 0, "unbounded"},
		{ScheduleCosine, 100, 0, 100, "warmup_steps 100 leaves none"},
		{"step", 0, 0, 100, `lr_schedule "step": want constant, cosine or linear`},
		{ScheduleConstant, -1, 0, 0, "warmup_steps -1"},
		{ScheduleCosine, 0, 1.5, 10, "min_lr_ratio 1.5"},
		{ScheduleCosine, 0, math.NaN(), 10, "min_lr_ratio NaN"},
	} {
		o := base
		o.LRSchedule, o.WarmupSteps, o.MinLRRatio = c.sched, c.warmup, c.floor
		err := o.ValidateSchedule(c.total, "max_steps")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v total %d: %v", c, c.total, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v total %d: err %v, want %q", c, c.total, err, c.want)
		}
		// The keys alone (without the run's length) are checked by Validate.
		keysBad := c.want != "" && c.total > 0 && !strings.Contains(c.want, "leaves none") || c.warmup < 0
		if verr := o.Validate(); (verr != nil) != keysBad {
			t.Errorf("%+v: Validate = %v", c, verr)
		}
	}
}
