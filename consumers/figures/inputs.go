package figures

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/report"
	"tau2rl/schemas/steplog"
)

// The figures' inputs from what a run left on disk: an archive with its step log
// (tau2-eval plot dataset=…), or a tau2-run experiment's report.json (tau2-eval plot report=…).

// FromArchive reads the figures' series from the archive at path (a dataset directory, file or
// glob; the trajectories that pass filter, each id once) and, when steps is set, from the
// trainer's step log there; pass^k is cut to maxK. The line it returns says what it read.
func FromArchive(ctx context.Context, path string, filter dataset.Filter, steps string, maxK int) (Input, string, error) {
	var in Input
	ds, err := dataset.Open(path)
	if err != nil {
		return in, "", fmt.Errorf("plot: %w", err)
	}
	seen := map[string]bool{}
	var trajs []*schemas.Trajectory
	if _, err := ds.Scan(ctx, filter, func(t *schemas.Trajectory) error {
		if !seen[t.ID] { // an id archived twice counts once
			seen[t.ID] = true
			trajs = append(trajs, t)
		}
		return nil
	}); err != nil {
		return in, "", fmt.Errorf("plot: %w", err)
	}
	if len(trajs) == 0 {
		return in, "", errors.New("plot: no trajectory of the dataset passes the filter")
	}
	in = Input{
		Reward:     RewardByVersion(trajs),
		PassK:      PassKByDomain(trajs, maxK),
		Throughput: Throughput(trajs),
		Tasks:      report.Diagnose(trajs).Cells,
	}
	if steps != "" {
		recs, err := steplog.Read(steps)
		if err != nil {
			return in, "", fmt.Errorf("plot: %w", err)
		}
		in.Mismatch = Mismatch(recs)
	}
	head := fmt.Sprintf("%d trajectories, %d policy versions", len(trajs), len(in.Reward))
	if len(in.Reward) > 0 {
		first, last := in.Reward[0], in.Reward[len(in.Reward)-1]
		head += fmt.Sprintf(", mean reward v%.0f %.3f → v%.0f %.3f", first.X, first.Y, last.X, last.Y)
	}
	return in, head, nil
}

// FromReport reads the figures' series from a tau2-run experiment's report.json at path
// (ParseReport) and returns the demonstrator's success (nil without demonstrations, the default
// baseline) and a line that says what it read.
func FromReport(path string, maxK int) (Input, *float64, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Input{}, nil, "", fmt.Errorf("plot: %w", err)
	}
	in, demo, err := ParseReport(b, maxK)
	if err != nil {
		return in, nil, "", fmt.Errorf("plot: %s: %w", path, err)
	}
	var r report.Report
	_ = json.Unmarshal(b, &r) // ParseReport parsed it
	if in.Timeline, err = timelineFromReport(path, &r); err != nil {
		return in, nil, "", err
	}
	first, last := in.Reward[0], in.Reward[len(in.Reward)-1]
	return in, demo, fmt.Sprintf("report %s: %d policy versions, mean reward v%.0f %.3f → v%.0f %.3f",
		path, len(in.Reward), first.X, first.Y, last.X, last.Y), nil
}

// ParseReport turns a report.json into the figures' series (pass^k cut to maxK) and the
// demonstrator's success (nil without demonstrations). A report without reward per version, with
// a version of no episodes or a negative deviation, or with mismatched per-step lists is an
// error.
func ParseReport(b []byte, maxK int) (Input, *float64, error) {
	var in Input
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return in, nil, fmt.Errorf("not a tau2-run experiment report: %w", err)
	}
	if len(r.GRPO.PerVersion) == 0 {
		return in, nil, errors.New("no reward per policy version (grpo.reward_per_version)")
	}
	if len(r.GRPO.MeanAbsDiff) != len(r.GRPO.CapFraction) {
		return in, nil, fmt.Errorf("%d mismatch values but %d capped fractions", len(r.GRPO.MeanAbsDiff), len(r.GRPO.CapFraction))
	}
	for _, v := range r.GRPO.PerVersion {
		if v.Episodes < 1 || v.Std < 0 {
			return in, nil, fmt.Errorf("version %d has %d episodes, std %v", v.Version, v.Episodes, v.Std)
		}
		in.Reward = append(in.Reward, PointFromStats(float64(v.Version), v.Episodes, v.Mean, v.Std))
	}
	for i := range r.GRPO.MeanAbsDiff {
		in.Mismatch = append(in.Mismatch, StepPoint{Step: int64(i + 1), AbsDiff: r.GRPO.MeanAbsDiff[i], CapMasked: r.GRPO.CapFraction[i]})
	}
	for _, e := range []struct {
		name string
		k    []float64
		n    int
	}{{"before GRPO", r.Before.PassK, r.Before.Tasks}, {"after GRPO", r.After.PassK, r.After.Tasks}} {
		if len(e.k) > 0 {
			k := e.k[:min(len(e.k), max(maxK, 1))]
			in.PassK = append(in.PassK, PassK{Domain: strings.TrimSpace(r.Config.Domain + " " + e.name), PassK: k, Tasks: e.n})
		}
	}
	in.Tasks = r.GRPO.Diagnosis.Cells
	var demo *float64
	if r.Demos.Episodes > 0 {
		demo = &r.Demos.MeanReward
	}
	return in, demo, nil
}
