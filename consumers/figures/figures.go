// Package figures draws a training run's curves from what the run left on disk — the archive
// (Parquet dataset, read with schemas/dataset) and the trainer's per-step log
// (schemas/steplog's steps.jsonl) — as PNG and SVG with gonum/plot:
//
//   - reward: mean τ² reward per policy version (at episode start) with a 95% confidence band
//     (mean ± 1.96 standard errors), and an optional baseline (e.g. the demonstrator's success);
//   - passk: pass^k for k = 1..K per domain (τ²'s estimator, tau2/evaluator);
//   - throughput: generated tokens per minute and episodes per minute (by episode end time);
//   - mismatch: per trainer step, the mean |behaviour − proximal| log-prob and the fraction of
//     tokens masked by behav_imp_weight_cap (the train/inference mismatch);
//   - gputime: the GRPO stage's timeline (gputime.jsonl), one row per sampler and the trainer
//     filled with each phase's share of the time, and each GPU's nvidia-smi utilisation
//     (timeline.go).
//
// The series are computed by pure functions (tested on their own); Draw only renders them.
package figures

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"

	"tau2rl/schemas"
	"tau2rl/schemas/report"
	"tau2rl/schemas/steplog"
	"tau2rl/tau2/evaluator"
)

// Point is one x with its mean and band.
type Point struct {
	X, Y, Lo, Hi float64
	N            int
}

// RewardByVersion is the mean reward per policy version at episode start, with a 95% band.
func RewardByVersion(trajs []*schemas.Trajectory) []Point {
	by := map[int64][]float64{}
	for _, t := range trajs {
		by[t.PolicyVersionStart] = append(by[t.PolicyVersionStart], t.Reward)
	}
	var vs []int64
	for v := range by {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	out := make([]Point, 0, len(vs))
	for _, v := range vs {
		rs := by[v]
		var s float64
		for _, r := range rs {
			s += r
		}
		mean := s / float64(len(rs))
		std := 0.0
		if len(rs) > 1 {
			var ss float64
			for _, r := range rs {
				ss += (r - mean) * (r - mean)
			}
			std = math.Sqrt(ss / float64(len(rs)-1))
		}
		out = append(out, PointFromStats(float64(v), len(rs), mean, std))
	}
	return out
}

// PointFromStats is the point of n samples with this mean and sample standard deviation, with
// the 95% band mean ± 1.96·std/√n — how RewardByVersion summarises the archive, and how a
// summary kept without the archive (tau2-run experiment's report.json) is drawn the same way.
func PointFromStats(x float64, n int, mean, std float64) Point {
	half := 0.0
	if n > 1 {
		half = 1.96 * std / math.Sqrt(float64(n))
	}
	return Point{X: x, Y: mean, Lo: mean - half, Hi: mean + half, N: n}
}

// PassK is pass^k for k = 1..len(PassK) of one domain.
type PassK struct {
	Domain string
	PassK  []float64
	Tasks  int
}

// PassKByDomain computes τ²'s pass^k per domain, for k up to maxK (and the fewest trials of any
// task).
func PassKByDomain(trajs []*schemas.Trajectory, maxK int) []PassK {
	by := map[string][]evaluator.Outcome{}
	for _, t := range trajs {
		r := t.Reward
		by[t.Domain] = append(by[t.Domain], evaluator.Outcome{TaskID: t.TaskID, Termination: t.Termination, Reward: &r})
	}
	var ds []string
	for d := range by {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	var out []PassK
	for _, d := range ds {
		m := evaluator.ComputeMetrics(by[d], maxK)
		out = append(out, PassK{Domain: d, PassK: m.PassHatK, Tasks: m.Tasks})
	}
	return out
}

// Rate is one minute of throughput, X in minutes since the first episode ended.
type Rate struct {
	Minute           float64
	Tokens, Episodes float64
}

// Throughput counts generated tokens and episodes per minute of episode end time.
func Throughput(trajs []*schemas.Trajectory) []Rate {
	if len(trajs) == 0 {
		return nil
	}
	first := trajs[0].EndedAt
	for _, t := range trajs {
		if t.EndedAt.Before(first) {
			first = t.EndedAt
		}
	}
	by := map[int]*Rate{}
	last := 0
	for _, t := range trajs {
		m := int(t.EndedAt.Sub(first) / time.Minute)
		r := by[m]
		if r == nil {
			r = &Rate{Minute: float64(m)}
			by[m] = r
		}
		r.Tokens += float64(t.GeneratedTokens())
		r.Episodes++
		last = max(last, m)
	}
	out := make([]Rate, 0, last+1)
	for m := 0; m <= last; m++ { // idle minutes are zeros, not gaps
		if r := by[m]; r != nil {
			out = append(out, *r)
		} else {
			out = append(out, Rate{Minute: float64(m)})
		}
	}
	return out
}

// StepPoint is one trainer step's mismatch numbers.
type StepPoint struct {
	Step               int64
	AbsDiff, CapMasked float64
}

// Mismatch reads the GRPO steps of a step log; a step logged twice (a restart between the log
// and the checkpoint) keeps its last record.
func Mismatch(recs []steplog.Record) []StepPoint {
	by := map[int64]StepPoint{}
	for _, r := range recs {
		if r.Kind != "grpo" {
			continue
		}
		by[r.Step] = StepPoint{Step: r.Step, AbsDiff: r.Metrics["behav_abs_diff"], CapMasked: r.Metrics["behav_cap_fraction"]}
	}
	out := make([]StepPoint, 0, len(by))
	for _, p := range by {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}

// Options control Draw.
type Options struct {
	// Formats are the file extensions to write (png, svg). Default both.
	Formats []string
	// Width and Height of each figure. Default 16 cm × 10 cm.
	Width, Height vg.Length
	// Baseline, when set, is drawn as a horizontal line on the reward figure (e.g. the
	// demonstrator's success rate, the SFT level).
	Baseline *float64
	// Title prefixes every figure title.
	Title string
}

// Input is what Draw renders; nil or empty parts are skipped.
type Input struct {
	Reward     []Point
	PassK      []PassK
	Throughput []Rate
	Mismatch   []StepPoint
	// Tasks are the GRPO episodes' success per task and policy version (schemas/report's
	// Diagnosis cells): the tasks_versions heat map.
	Tasks []report.Cell
	// Timeline is the GRPO stage's gputime.jsonl: the gputime figure (timeline.go).
	Timeline []report.TimelineSample
}

// prepare fills o's defaults (png and svg, 16 × 10 cm), refuses a format it cannot write, and
// creates dir: what every Draw function does first.
func prepare(dir string, o *Options) error {
	if len(o.Formats) == 0 {
		o.Formats = []string{"png", "svg"}
	}
	for _, f := range o.Formats {
		if f != "png" && f != "svg" {
			return fmt.Errorf("figures: format %q: want png or svg", f)
		}
	}
	if o.Width == 0 {
		o.Width = 16 * vg.Centimeter
	}
	if o.Height == 0 {
		o.Height = 10 * vg.Centimeter
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("figures: %w", err)
	}
	return nil
}

// Draw writes every figure of in to dir (created) in every format and returns the paths.
func Draw(dir string, in Input, o Options) ([]string, error) {
	if err := prepare(dir, &o); err != nil {
		return nil, err
	}
	var plots []struct {
		name string
		p    *plot.Plot
	}
	add := func(name string, p *plot.Plot, err error) error {
		if err != nil {
			return fmt.Errorf("figures: %s: %w", name, err)
		}
		if p != nil {
			plots = append(plots, struct {
				name string
				p    *plot.Plot
			}{name, p})
		}
		return nil
	}
	rp, err := rewardPlot(in.Reward, o)
	if err := add("reward", rp, err); err != nil {
		return nil, err
	}
	pk, err := passKPlot(in.PassK, o)
	if err := add("passk", pk, err); err != nil {
		return nil, err
	}
	tok, eps, err := throughputPlots(in.Throughput, o)
	if err := add("tokens_per_minute", tok, err); err != nil {
		return nil, err
	}
	if err := add("episodes_per_minute", eps, nil); err != nil {
		return nil, err
	}
	mp, err := mismatchPlot(in.Mismatch, o)
	if err := add("mismatch", mp, err); err != nil {
		return nil, err
	}
	hm, err := taskHeatmap(in.Tasks, o)
	if err := add("tasks_versions", hm, err); err != nil {
		return nil, err
	}
	tp, err := timelinePlot(in.Timeline, o)
	if err := add("gputime", tp, err); err != nil {
		return nil, err
	}
	var files []string
	for _, pl := range plots {
		var err error
		if files, err = save(dir, pl.name, pl.p, o, files); err != nil {
			return files, err
		}
	}
	return files, nil
}

// save writes plot p as dir/name.<format> in every format of o, appending the paths to files.
func save(dir, name string, p *plot.Plot, o Options, files []string) ([]string, error) {
	for _, f := range o.Formats {
		path := filepath.Join(dir, name+"."+f)
		if err := p.Save(o.Width, o.Height, path); err != nil {
			return files, fmt.Errorf("figures: save %s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}

func titled(o Options, s string) string {
	// A title typed with its own colon ("One H100, airline train:") gets one, not two.
	if t := strings.TrimRight(strings.TrimSpace(o.Title), ": "); t != "" {
		return t + ": " + s
	}
	return s
}

// placeLegend puts p's legend in the corner of the data area where it covers no point of the
// series, in the order top right, top left, bottom right, bottom left: a reward near 1 would run
// under a legend fixed at the top. When every corner would cover points (a noisy series, or a
// run of two steps whose points sit in the corners) it leaves room instead: the legend goes to
// the less crowded top corner and the y axis is raised until nothing lies under it. The legend's
// box is measured as gonum draws it on a figure of o's size (legendCovers). Call it after the
// plotters and the legend entries are added (the axes' ranges come from the plotters).
func placeLegend(p *plot.Plot, o Options, series ...plotter.XYs) {
	type corner struct{ top, left bool }
	count := func(c corner) int {
		p.Legend.Top, p.Legend.Left = c.top, c.left
		return legendCovers(p, o, series...)
	}
	for _, c := range []corner{{true, false}, {true, true}, {false, false}, {false, true}} {
		if count(c) == 0 {
			p.Legend.Top, p.Legend.Left = c.top, c.left
			return
		}
	}
	c := corner{true, false}
	if count(corner{true, true}) < count(c) {
		c = corner{true, true}
	}
	p.Legend.Top, p.Legend.Left = c.top, c.left
	span := p.Y.Max - p.Y.Min
	if span <= 0 {
		span = 1
	}
	for i := 0; i < 60 && legendCovers(p, o, series...) > 0; i++ {
		p.Y.Max += 0.05 * span
	}
}

// legendCovers counts the points of series (and the lines between them) that p's legend, where
// it stands now, would cover on a figure of o's size (with a margin of 4 points around the legend's box). It lays the figure
// out as gonum's Plot.Draw does: the data canvas below the title and beside the axes, the legend
// in one of its corners.
func legendCovers(p *plot.Plot, o Options, series ...plotter.XYs) int {
	w, h := o.Width, o.Height
	if w == 0 {
		w = 16 * vg.Centimeter
	}
	if h == 0 {
		h = 10 * vg.Centimeter
	}
	dc := p.DataCanvas(draw.NewCanvas(new(recorder.Canvas), w, h))
	size := p.Legend.Rectangle(dc).Size()
	var r vg.Rectangle
	if p.Legend.Left {
		r.Min.X, r.Max.X = dc.Min.X, dc.Min.X+size.X
	} else {
		r.Min.X, r.Max.X = dc.Max.X-size.X, dc.Max.X
	}
	if p.Legend.Top {
		r.Min.Y, r.Max.Y = dc.Max.Y-size.Y, dc.Max.Y
	} else {
		r.Min.Y, r.Max.Y = dc.Min.Y, dc.Min.Y+size.Y
	}
	const margin = vg.Length(4) // points
	in := func(q plotter.XY) bool {
		x, y := dc.X(p.X.Norm(q.X)), dc.Y(p.Y.Norm(q.Y))
		return x >= r.Min.X-margin && x <= r.Max.X+margin && y >= r.Min.Y-margin && y <= r.Max.Y+margin
	}
	// Points, and the lines drawn between consecutive points (sampled), which can cross a
	// corner that holds no point.
	n := 0
	for _, xys := range series {
		for i, q := range xys {
			if in(q) {
				n++
			}
			if i == 0 {
				continue
			}
			prev := xys[i-1]
			for k := 1; k < 16; k++ {
				f := float64(k) / 16
				if in(plotter.XY{X: prev.X + f*(q.X-prev.X), Y: prev.Y + f*(q.Y-prev.Y)}) {
					n++
					break
				}
			}
		}
	}
	return n
}

// newPlot is a figure with its title (prefixed by o.Title), axis labels and a y axis from 0;
// integer ticks on x when the x values are counts (versions, k, steps).
func newPlot(o Options, title, x, y string, intX bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = titled(o, title)
	p.X.Label.Text = x
	if intX {
		p.X.Tick.Marker = intTicks
	}
	p.Y.Label.Text = y
	p.Y.Min = 0
	return p
}

func rewardPlot(pts []Point, o Options) (*plot.Plot, error) {
	if len(pts) == 0 {
		return nil, nil
	}
	p := newPlot(o, "mean reward per policy version", "policy version (episode start)", "τ² reward", true)
	p.Y.Max = 1
	mean := make(plotter.XYs, len(pts))
	band := make(plotter.XYs, 0, 2*len(pts))
	for i, q := range pts {
		mean[i] = plotter.XY{X: q.X, Y: q.Y}
		band = append(band, plotter.XY{X: q.X, Y: math.Min(1, q.Hi)})
	}
	for i := len(pts) - 1; i >= 0; i-- {
		band = append(band, plotter.XY{X: pts[i].X, Y: math.Max(0, pts[i].Lo)})
	}
	poly, err := plotter.NewPolygon(band)
	if err != nil {
		return nil, err
	}
	poly.Color = colorBand
	poly.LineStyle.Width = 0
	line, points, err := plotter.NewLinePoints(mean)
	if err != nil {
		return nil, err
	}
	line.Color, points.Color = colorMain, colorMain
	p.Add(poly, line, points)
	p.Legend.Add("mean reward", line, points)
	p.Legend.Add("95% confidence band", poly)
	if o.Baseline != nil {
		b := *o.Baseline
		f := plotter.NewFunction(func(float64) float64 { return b })
		f.Color = colorBaseline
		f.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(f)
		p.Legend.Add(fmt.Sprintf("baseline %.2f", b), f)
	}
	placeLegend(p, o, mean, band)
	p.Add(plotter.NewGrid())
	return p, nil
}

func passKPlot(rows []PassK, o Options) (*plot.Plot, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	p := newPlot(o, "pass^k per domain", "k", "pass^k", true)
	p.Y.Max = 1
	var all []plotter.XYs
	for i, r := range rows {
		xys := make(plotter.XYs, len(r.PassK))
		for k, v := range r.PassK {
			xys[k] = plotter.XY{X: float64(k + 1), Y: v}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		c := palette[i%len(palette)]
		line.Color, points.Color = c, c
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("%s (%d tasks)", r.Domain, r.Tasks), line, points)
		all = append(all, xys)
	}
	placeLegend(p, o, all...)
	p.Add(plotter.NewGrid())
	return p, nil
}

func throughputPlots(rates []Rate, o Options) (*plot.Plot, *plot.Plot, error) {
	if len(rates) == 0 {
		return nil, nil, nil
	}
	mk := func(title, ylabel, legend string, y func(Rate) float64) (*plot.Plot, error) {
		p := newPlot(o, title, "minutes since the first episode ended", ylabel, false)
		xys := make(plotter.XYs, len(rates))
		for i, r := range rates {
			xys[i] = plotter.XY{X: r.Minute, Y: y(r)}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color = colorMain, colorMain
		p.Add(line, points, plotter.NewGrid())
		p.Legend.Add(legend, line, points)
		placeLegend(p, o, xys)
		return p, nil
	}
	tok, err := mk("generated tokens per minute", "tokens / minute", "generated tokens", func(r Rate) float64 { return r.Tokens })
	if err != nil {
		return nil, nil, err
	}
	eps, err := mk("episodes per minute", "episodes / minute", "episodes", func(r Rate) float64 { return r.Episodes })
	return tok, eps, err
}

func mismatchPlot(pts []StepPoint, o Options) (*plot.Plot, error) {
	if len(pts) == 0 {
		return nil, nil
	}
	p := newPlot(o, "train/inference log-prob mismatch", "trainer step", "nats / fraction of tokens", true)
	diff := make(plotter.XYs, len(pts))
	capped := make(plotter.XYs, len(pts))
	for i, q := range pts {
		diff[i] = plotter.XY{X: float64(q.Step), Y: q.AbsDiff}
		capped[i] = plotter.XY{X: float64(q.Step), Y: q.CapMasked}
	}
	for i, s := range []struct {
		name string
		xys  plotter.XYs
	}{{"mean |behaviour − proximal|", diff}, {"fraction masked by the weight cap", capped}} {
		line, points, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, err
		}
		c := palette[i%len(palette)]
		line.Color, points.Color = c, c
		p.Add(line, points)
		p.Legend.Add(s.name, line, points)
	}
	placeLegend(p, o, diff, capped)
	p.Add(plotter.NewGrid())
	return p, nil
}

// intTicks labels integer positions only (policy versions, steps, k), about ten of them.
var intTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	step := math.Max(1, math.Ceil((hi-lo)/10))
	var out []plot.Tick
	for v := math.Ceil(lo); v <= hi; v += step {
		out = append(out, plot.Tick{Value: v, Label: fmt.Sprintf("%.0f", v)})
	}
	return out
})
