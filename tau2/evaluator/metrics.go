package evaluator

import (
	"math/big"
	"sort"
)

// Outcome is one simulation's result for pass^k.
type Outcome struct {
	TaskID string
	// Termination is the termination reason; infrastructure_error
	// simulations are excluded, as in τ².
	Termination string
	// Reward is nil when the reward was not evaluated; such simulations
	// make their task's pass^k undefined (the task is excluded and
	// counted in Metrics.TasksNotEvaluated).
	Reward *float64
}

// Metrics are τ²'s headline metrics (metrics/agent_metrics.py).
type Metrics struct {
	// PassHatK[k-1] is pass^k for k = 1..MaxK.
	PassHatK []float64
	// MaxK is min(num_trials, fewest simulations of any task).
	MaxK int
	// AvgReward is the mean reward of the evaluated simulations.
	AvgReward float64
	// Simulations counts simulations after excluding infrastructure errors.
	Simulations   int
	Tasks         int
	InfraErrors   int
	NotEvaluated  int
	TasksExcluded int
}

// PassHatK is τ²'s pass_hat_k: C(successes, k) / C(trials, k).
func PassHatK(trials, successes, k int) float64 {
	if trials < k || k < 0 {
		return 0
	}
	num := new(big.Int).Binomial(int64(successes), int64(k))
	den := new(big.Int).Binomial(int64(trials), int64(k))
	f, _ := new(big.Rat).SetFrac(num, den).Float64()
	return f
}

// ComputeMetrics is τ²'s compute_metrics for avg reward and pass^k: drop
// infrastructure errors; success = reward within 1e-6 of 1; max k =
// min(numTrials, fewest simulations of a task); pass^k averaged over
// tasks. Tasks with a not-evaluated simulation are left out (counted).
func ComputeMetrics(outcomes []Outcome, numTrials int) Metrics {
	var m Metrics
	type acc struct {
		n, succ int
		open    bool
	}
	byTask := map[string]*acc{}
	var sum float64
	for _, o := range outcomes {
		if o.Termination == TerminationInfrastructureError {
			m.InfraErrors++
			continue
		}
		m.Simulations++
		a := byTask[o.TaskID]
		if a == nil {
			a = &acc{}
			byTask[o.TaskID] = a
		}
		a.n++
		if o.Reward == nil {
			a.open = true
			m.NotEvaluated++
			continue
		}
		sum += *o.Reward
		if IsSuccessful(*o.Reward) {
			a.succ++
		}
	}
	if ev := m.Simulations - m.NotEvaluated; ev > 0 {
		m.AvgReward = sum / float64(ev)
	}
	ids := make([]string, 0, len(byTask))
	for id, a := range byTask {
		if a.open {
			m.TasksExcluded++
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	m.Tasks = len(ids)
	if m.Tasks == 0 {
		return m
	}
	maxK := numTrials
	for _, id := range ids {
		if n := byTask[id].n; maxK <= 0 || n < maxK {
			maxK = n
		}
	}
	m.MaxK = maxK
	for k := 1; k <= maxK; k++ {
		var s float64
		for _, id := range ids {
			a := byTask[id]
			s += PassHatK(a.n, a.succ, k)
		}
		m.PassHatK = append(m.PassHatK, s/float64(len(ids)))
	}
	return m
}
