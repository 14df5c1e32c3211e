package evaluator

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"tau2rl/tau2/data"
	"tau2rl/tau2/pyjson"
)

// RegradeOptions configure Regrade.
type RegradeOptions struct {
	// Grading options; Domain and Solo are taken from the file when empty
	// or false.
	Options
	// Workers is the number of parallel graders (0 = GOMAXPROCS).
	Workers int
	// Tasks, when set, replaces the file's embedded task definitions by id
	// (τ²'s evaluate-trajs --fresh-tasks); tasks it lacks keep theirs.
	Tasks []*data.Task
}

// SimResult is one simulation's regrade.
type SimResult struct {
	ID          string
	TaskID      string
	Trial       *int64
	Termination string
	// New is the recomputed reward info; nil when Err is set.
	New *RewardInfo
	// Old is the reward and breakdown stored in the file (OldReward nil:
	// absent, null, or not a number).
	OldReward    *float64
	OldBreakdown *pyjson.Object
	// Err is a grading failure (an evaluation error, never a reward); the
	// simulation keeps its original reward_info in the output.
	Err error
}

// Regrade re-computes every simulation's reward_info of a results file,
// in parallel, and returns the rewritten file with per-simulation results
// (file order). A simulation that cannot be graded keeps its original
// reward_info and reports Err; a file-level problem (bad task, unknown
// domain) is the returned error.
func Regrade(ctx context.Context, r *Results, opts RegradeOptions) ([]byte, []SimResult, error) {
	if opts.Domain == "" {
		d, err := r.Domain()
		if err != nil {
			return nil, nil, err
		}
		opts.Domain = d
	}
	if !opts.Solo {
		opts.Solo = r.Solo()
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	tasks, err := parallelMap(len(r.TaskSpans), workers, r.Task)
	if err != nil {
		return nil, nil, err
	}
	byID := make(map[string]*data.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
	}
	for _, t := range opts.Tasks {
		if _, ok := byID[t.ID]; ok {
			byID[t.ID] = t
		}
	}
	if _, err := NewGrader(opts.Options); err != nil {
		return nil, nil, err
	}

	// Parse simulations and group them by task, so each worker's Grader
	// replays a task's gold actions once.
	sims, err := parallelMap(len(r.Sims), workers, r.Simulation)
	if err != nil {
		return nil, nil, err
	}
	groups := map[string][]int{}
	var order []string
	for i, s := range sims {
		if _, ok := groups[s.TaskID]; !ok {
			order = append(order, s.TaskID)
		}
		groups[s.TaskID] = append(groups[s.TaskID], i)
	}
	results := make([]SimResult, len(sims))
	repl := make([][]byte, len(sims))
	jobs := make(chan string)
	var wg sync.WaitGroup
	var fatal error
	var fatalOnce sync.Once
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := NewGrader(opts.Options)
			if err != nil {
				fatalOnce.Do(func() { fatal = err })
				for range jobs {
				}
				return
			}
			for tid := range jobs {
				task := byID[tid]
				for _, i := range groups[tid] {
					s := sims[i]
					res := SimResult{ID: s.ID, TaskID: s.TaskID, Trial: s.Trial, Termination: s.TerminationReason}
					if s.RewardInfo != nil {
						res.OldReward = numberOrNil(s.RewardInfo, "reward")
						bv, _ := s.RewardInfo.Get("reward_breakdown")
						res.OldBreakdown, _ = bv.(*pyjson.Object)
					}
					if task == nil {
						res.Err = fmt.Errorf("%w: task %q is not in the results file", ErrEvaluation, s.TaskID)
					} else if ctx.Err() != nil {
						res.Err = ctx.Err()
					} else {
						res.New, res.Err = g.Evaluate(ctx, task, s.Messages, s.TerminationReason)
					}
					if res.Err == nil {
						repl[i], res.Err = r.EncodeRewardInfo(i, res.New)
					}
					results[i] = res
				}
			}
		}()
	}
	for _, tid := range order {
		jobs <- tid
	}
	close(jobs)
	wg.Wait()
	if fatal != nil {
		return nil, nil, fatal
	}
	out, err := r.Rewrite(repl)
	if err != nil {
		return nil, nil, err
	}
	return out, results, nil
}

func numberOrNil(o *pyjson.Object, key string) *float64 {
	v, _ := o.Get(key)
	switch x := v.(type) {
	case float64:
		return &x
	case int64:
		f := float64(x)
		return &f
	}
	return nil
}

// parallelMap runs f(0..n-1) on workers goroutines; the first error wins.
func parallelMap[T any](n, workers int, f func(int) (T, error)) ([]T, error) {
	out := make([]T, n)
	errs := make([]error, n)
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				out[i], errs[i] = f(i)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
