package figures

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"tau2rl/schemas/report"
)

// Several runs of one recipe on one figure (tau2-eval plot report=a.json,b.json,…): whether a
// result holds across seeds is read from the spread of the runs, not from one curve.
//
//   - runs_reward: each run's mean reward per policy version (one line per run, labelled by its
//     seed and run directory), the mean across runs with the min–max band, and the
//     demonstrator's success (the mean of the runs' demonstrations) as a horizontal line;
//   - runs_passk: pass^1 and pass^K before and after GRPO, grouped per run;
//   - runs_summary.json and runs_summary.md: pass^1 and pass^K of each run and their mean, min
//     and max across runs (RunsSummary).

// Run is one experiment of a several-run figure, read from its report.json.
type Run struct {
	// Label names the run on the figures: its seed and run directory.
	Label string
	// Report is the report.json it was read from.
	Report string
	Seed   uint64
	// Reward is the mean reward per policy version (ParseReport's).
	Reward []Point
	// Demo is the demonstrator's success (nil without demonstrations).
	Demo *float64
	// Before and After are pass^k, k = 1..len, of the evaluations before and after GRPO (empty
	// when the run did not evaluate).
	Before, After []float64
}

// FromReports reads the runs of several report.json files (ParseReport validates each). Each
// run is labelled "seed N · DIR", DIR the directory holding its report.json; two runs with the
// same label get their position appended, so every line stays told apart.
func FromReports(paths []string, maxK int) ([]Run, error) {
	if len(paths) == 0 {
		return nil, errors.New("plot: no report.json given")
	}
	var runs []Run
	seen := map[string]int{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		in, demo, err := ParseReport(b, maxK)
		if err != nil {
			return nil, fmt.Errorf("plot: %s: %w", p, err)
		}
		var r report.Report
		if err := json.Unmarshal(b, &r); err != nil { // ParseReport has accepted it: cannot fail
			return nil, fmt.Errorf("plot: %s: %w", p, err)
		}
		cut := func(k []float64) []float64 { return k[:min(len(k), max(maxK, 1))] }
		run := Run{Report: p, Seed: r.Config.Seed, Reward: in.Reward, Demo: demo, Before: cut(r.Before.PassK), After: cut(r.After.PassK)}
		run.Label = fmt.Sprintf("seed %d · %s", r.Config.Seed, filepath.Base(filepath.Dir(p)))
		if n := seen[run.Label]; n > 0 {
			seen[run.Label]++
			run.Label = fmt.Sprintf("%s (%d)", run.Label, n+1)
		} else {
			seen[run.Label] = 1
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// Band is the runs' mean reward at one policy version: their mean, minimum and maximum, over
// the Runs runs that reached the version.
type Band struct {
	Version        float64
	Mean, Min, Max float64
	Runs           int
}

// AcrossRuns is the mean and min–max of the runs' mean reward per policy version. A version
// only some runs reached (a run stopped by grpo_time) is summarised over those, and Runs says
// how many; the figure draws the across-runs line only where every run is present, so its end
// is not one run's curve under another name.
func AcrossRuns(runs []Run) []Band {
	by := map[float64][]float64{}
	for _, r := range runs {
		for _, p := range r.Reward {
			by[p.X] = append(by[p.X], p.Y)
		}
	}
	out := make([]Band, 0, len(by))
	for v, ys := range by {
		s := spreadOf(ys)
		out = append(out, Band{Version: v, Mean: s.Mean, Min: s.Min, Max: s.Max, Runs: s.Runs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// Spread is the mean, minimum and maximum of one number over the runs that have it.
type Spread struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Runs int     `json:"runs"`
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := Spread{Min: math.Inf(1), Max: math.Inf(-1), Runs: len(xs)}
	for _, x := range xs {
		s.Mean += x
		s.Min, s.Max = math.Min(s.Min, x), math.Max(s.Max, x)
	}
	s.Mean /= float64(len(xs))
	return s
}

// RunSummary is one run's line of RunsSummary; a pass^k the run did not measure (fewer trials
// than K, or no evaluation) is absent.
type RunSummary struct {
	Label       string   `json:"label"`
	Report      string   `json:"report"`
	Seed        uint64   `json:"seed"`
	Demo        *float64 `json:"demonstrator_success,omitempty"`
	Pass1Before *float64 `json:"pass1_before,omitempty"`
	Pass1After  *float64 `json:"pass1_after,omitempty"`
	PassKBefore *float64 `json:"passk_before,omitempty"`
	PassKAfter  *float64 `json:"passk_after,omitempty"`
}

// RunsSummary is runs_summary.json: each run's pass^1 and pass^K (K = max_k, 4 by default: the
// issue's pass^4) before and after GRPO, and their spread across runs.
type RunsSummary struct {
	K           int          `json:"k"`
	Runs        []RunSummary `json:"runs"`
	Pass1Before Spread       `json:"pass1_before"`
	Pass1After  Spread       `json:"pass1_after"`
	PassKBefore Spread       `json:"passk_before"`
	PassKAfter  Spread       `json:"passk_after"`
	Demo        Spread       `json:"demonstrator_success"`
}

// Summarize is the runs' RunsSummary for pass^k.
func Summarize(runs []Run, k int) RunsSummary {
	at := func(ks []float64, i int) *float64 {
		if i < 1 || i > len(ks) {
			return nil
		}
		v := ks[i-1]
		return &v
	}
	s := RunsSummary{K: k}
	var p1b, p1a, pkb, pka, demo []float64
	add := func(dst *[]float64, v *float64) {
		if v != nil {
			*dst = append(*dst, *v)
		}
	}
	for _, r := range runs {
		rs := RunSummary{Label: r.Label, Report: r.Report, Seed: r.Seed, Demo: r.Demo,
			Pass1Before: at(r.Before, 1), Pass1After: at(r.After, 1), PassKBefore: at(r.Before, k), PassKAfter: at(r.After, k)}
		s.Runs = append(s.Runs, rs)
		add(&p1b, rs.Pass1Before)
		add(&p1a, rs.Pass1After)
		add(&pkb, rs.PassKBefore)
		add(&pka, rs.PassKAfter)
		add(&demo, rs.Demo)
	}
	s.Pass1Before, s.Pass1After, s.PassKBefore, s.PassKAfter, s.Demo = spreadOf(p1b), spreadOf(p1a), spreadOf(pkb), spreadOf(pka), spreadOf(demo)
	return s
}

// Markdown is the summary as a table for docs/LEARNING.md: a row per run, then the mean, min
// and max across runs; "–" where a run did not measure a number.
func (s RunsSummary) Markdown() string {
	f := func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.3f", *v)
	}
	g := func(sp Spread, pick func(Spread) float64) string {
		if sp.Runs == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3f", pick(sp))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| run | demonstrator | pass^1 before | pass^1 after | pass^%d before | pass^%d after |\n", s.K, s.K)
	b.WriteString("|---|---:|---:|---:|---:|---:|\n")
	for _, r := range s.Runs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Label, f(r.Demo), f(r.Pass1Before), f(r.Pass1After), f(r.PassKBefore), f(r.PassKAfter))
	}
	for _, row := range []struct {
		name string
		pick func(Spread) float64
	}{{"mean", func(s Spread) float64 { return s.Mean }}, {"min", func(s Spread) float64 { return s.Min }}, {"max", func(s Spread) float64 { return s.Max }}} {
		fmt.Fprintf(&b, "| **%s** (%d runs) | %s | %s | %s | %s | %s |\n", row.name, len(s.Runs), g(s.Demo, row.pick),
			g(s.Pass1Before, row.pick), g(s.Pass1After, row.pick), g(s.PassKBefore, row.pick), g(s.PassKAfter, row.pick))
	}
	return b.String()
}

// DrawRuns writes the several-run figures (runs_reward, runs_passk) in every format of o and
// runs_summary.json and runs_summary.md for pass^k to dir (created), and returns the paths.
// o.Baseline, when set, replaces the demonstrators' mean success as the horizontal line.
func DrawRuns(dir string, runs []Run, k int, o Options) ([]string, error) {
	if len(runs) == 0 {
		return nil, errors.New("figures: no run to draw")
	}
	if err := prepare(dir, &o); err != nil {
		return nil, err
	}
	sum := Summarize(runs, k)
	if o.Baseline == nil && sum.Demo.Runs > 0 {
		d := sum.Demo.Mean
		o.Baseline = &d
	}
	rp, err := runsRewardPlot(runs, o)
	if err != nil {
		return nil, fmt.Errorf("figures: runs_reward: %w", err)
	}
	pp, err := runsPassKPlot(runs, k, o)
	if err != nil {
		return nil, fmt.Errorf("figures: runs_passk: %w", err)
	}
	var files []string
	for _, pl := range []struct {
		name string
		p    *plot.Plot
	}{{"runs_reward", rp}, {"runs_passk", pp}} {
		if pl.p == nil {
			continue
		}
		if files, err = save(dir, pl.name, pl.p, o, files); err != nil {
			return files, err
		}
	}
	js, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return files, fmt.Errorf("figures: runs summary: %w", err)
	}
	for _, w := range []struct {
		name string
		body []byte
	}{{"runs_summary.json", append(js, '\n')}, {"runs_summary.md", []byte(sum.Markdown())}} {
		path := filepath.Join(dir, w.name)
		if err := os.WriteFile(path, w.body, 0o644); err != nil {
			return files, fmt.Errorf("figures: %w", err)
		}
		files = append(files, path)
	}
	return files, nil
}

func runsRewardPlot(runs []Run, o Options) (*plot.Plot, error) {
	p := newPlot(o, fmt.Sprintf("mean reward per policy version, %d runs", len(runs)), "policy version (episode start)", "τ² reward", true)
	p.Y.Max = 1
	bands := AcrossRuns(runs)
	var all []plotter.XYs
	if len(bands) > 0 {
		poly := make(plotter.XYs, 0, 2*len(bands))
		for _, b := range bands {
			poly = append(poly, plotter.XY{X: b.Version, Y: b.Max})
		}
		for i := len(bands) - 1; i >= 0; i-- {
			poly = append(poly, plotter.XY{X: bands[i].Version, Y: bands[i].Min})
		}
		pg, err := plotter.NewPolygon(poly)
		if err != nil {
			return nil, err
		}
		pg.Color = colorBand
		pg.LineStyle.Width = 0
		p.Add(pg)
		p.Legend.Add("min–max across runs", pg)
		all = append(all, poly)
	}
	for i, r := range runs {
		xys := make(plotter.XYs, len(r.Reward))
		for j, q := range r.Reward {
			xys[j] = plotter.XY{X: q.X, Y: q.Y}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		c := palette[(i+1)%len(palette)]
		line.Color, points.Color = c, c
		line.Width = vg.Points(1)
		points.Radius = vg.Points(1.5)
		p.Add(line, points)
		p.Legend.Add(r.Label, line, points)
		all = append(all, xys)
	}
	var mean plotter.XYs
	for _, b := range bands {
		if b.Runs == len(runs) {
			mean = append(mean, plotter.XY{X: b.Version, Y: b.Mean})
		}
	}
	if len(mean) > 0 {
		line, err := plotter.NewLine(mean)
		if err != nil {
			return nil, err
		}
		line.Color = colorMain
		line.Width = vg.Points(2.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("mean of the %d runs", len(runs)), line)
		all = append(all, mean)
	}
	if o.Baseline != nil {
		b := *o.Baseline
		f := plotter.NewFunction(func(float64) float64 { return b })
		f.Color = colorBaseline
		f.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(f)
		p.Legend.Add(fmt.Sprintf("demonstrator %.2f", b), f)
	}
	placeLegend(p, o, all...)
	p.Add(plotter.NewGrid())
	return p, nil
}

// runsPassKPlot is a grouped bar chart: a group per run, four bars (pass^1 before and after,
// pass^K before and after); a number a run did not measure is a missing bar (height 0).
func runsPassKPlot(runs []Run, k int, o Options) (*plot.Plot, error) {
	type bar struct {
		name string
		ks   func(Run) []float64
		i    int
	}
	bars := []bar{
		{"pass^1 before GRPO", func(r Run) []float64 { return r.Before }, 1},
		{"pass^1 after GRPO", func(r Run) []float64 { return r.After }, 1},
	}
	if k > 1 {
		bars = append(bars,
			bar{fmt.Sprintf("pass^%d before GRPO", k), func(r Run) []float64 { return r.Before }, k},
			bar{fmt.Sprintf("pass^%d after GRPO", k), func(r Run) []float64 { return r.After }, k})
	}
	measured := false
	for _, r := range runs {
		measured = measured || len(r.Before) > 0 || len(r.After) > 0
	}
	if !measured {
		return nil, nil // no run evaluated: no figure
	}
	p := newPlot(o, "pass^k before and after GRPO, per run", "", "pass^k", false)
	p.Y.Max = 1
	w := vg.Points(float64(min(14, 200/max(len(runs)*len(bars), 1))))
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.Label
	}
	var tops plotter.XYs // the bars' tops, kept clear of the legend
	for j, b := range bars {
		vals := make(plotter.Values, len(runs))
		for i, r := range runs {
			if ks := b.ks(r); b.i <= len(ks) {
				vals[i] = ks[b.i-1]
			}
			tops = append(tops, plotter.XY{X: float64(i), Y: vals[i]})
		}
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		bc.Color = palette[j%len(palette)]
		bc.LineStyle.Width = 0
		bc.Offset = vg.Length(float64(j)-float64(len(bars)-1)/2) * w
		p.Add(bc)
		p.Legend.Add(b.name, bc)
	}
	p.NominalX(names...)
	placeLegend(p, o, tops)
	p.Add(plotter.NewGrid())
	return p, nil
}
