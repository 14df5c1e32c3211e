package figures

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"tau2rl/schemas/report"
)

// The GPU-time timeline (gputime): x is the GRPO stage's wall time; each process (every sampler,
// the trainer) has a row, and in each interval between two of its readings the row is filled
// bottom-up with the share of the interval each phase took, from the process's own timers
// (schemas/report's TimelineSample): a full row is a busy process, an empty one an idle one.
// Each GPU nvidia-smi read has a row with its utilisation as a line (0 at the row's bottom,
// 100% at its top), the cross-check of the timers.

// TimelineRow is one process's row: its intervals.
type TimelineRow struct {
	Role, Name string
	Intervals  []Interval
}

// Interval is one span between two readings: each phase's share of it, in [0, 1].
type Interval struct {
	Start, End float64
	Share      map[string]float64
}

// UtilLine is one GPU's utilisation readings (t, percent).
type UtilLine struct {
	Index string
	XYs   plotter.XYs
}

// timelinePhases orders the phases bottom-up in a row, with a colour each (Okabe–Ito, as the
// other figures); the trainer's waiting is drawn pale: it is time without GPU work.
var timelinePhases = []struct {
	name string
	c    color.Color
}{
	{"decode", palette[0]},
	{"prefill", palette[2]},
	{"mixed", color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 0xFF}},
	{"train", palette[1]},
	{"recompute", palette[4]},
	{"checkpoint", color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xFF}},
	{"weight_update", palette[3]},
	{"weight_sync", palette[3]},
	{"waiting", color.RGBA{R: 0xDD, G: 0xDD, B: 0xDD, A: 0xFF}},
}

// TimelineRows turns the timeline's samplers and trainer into rows of intervals (producers and
// GPUs have no busy time; GPUs are UtilLines). Shares are each phase's growth over the interval's
// length (schemas/report.Delta: a restarted process counts from 0), clamped to [0, 1].
func TimelineRows(samples []report.TimelineSample) []TimelineRow {
	var out []TimelineRow
	for _, se := range report.SplitTimeline(samples) {
		if se.Role != report.RoleSampler && se.Role != report.RoleTrainer {
			continue
		}
		b := TimelineRow{Role: se.Role, Name: se.Name}
		for i := 1; i < len(se.Samples); i++ {
			prev, cur := se.Samples[i-1], se.Samples[i]
			d := cur.T - prev.T
			if !(d > 0) {
				continue
			}
			iv := Interval{Start: prev.T, End: cur.T, Share: map[string]float64{}}
			for p, v := range cur.Busy {
				sh := report.Delta(prev.Busy[p], v) / d
				if math.IsNaN(sh) || sh < 0 {
					sh = 0
				}
				iv.Share[p] = math.Min(sh, 1)
			}
			b.Intervals = append(b.Intervals, iv)
		}
		if len(b.Intervals) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// UtilLines are the GPUs' utilisation readings in time order.
func UtilLines(samples []report.TimelineSample) []UtilLine {
	var out []UtilLine
	for _, se := range report.SplitTimeline(samples) {
		if se.Role != report.RoleGPU {
			continue
		}
		l := UtilLine{Index: se.Name}
		for _, s := range se.Samples {
			if s.Util != nil {
				l.XYs = append(l.XYs, plotter.XY{X: s.T, Y: *s.Util})
			}
		}
		if len(l.XYs) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// ReadTimelineFile reads gputime.jsonl at path.
func ReadTimelineFile(path string) ([]report.TimelineSample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	defer f.Close()
	s, err := report.ReadTimeline(f)
	if err != nil {
		return nil, fmt.Errorf("plot: %s: %w", path, err)
	}
	return s, nil
}

// timelineFromReport finds a report's timeline: the path it names, else gputime.jsonl beside
// the report (a run directory copied off the GPU machine keeps its files but not its paths).
// No timeline (a report written before there was one) is not an error: no figure.
func timelineFromReport(reportPath string, r *report.Report) ([]report.TimelineSample, error) {
	var named string
	if r.GRPO.GPUTime != nil {
		named = r.GRPO.GPUTime.Timeline
	}
	for _, p := range []string{named, filepath.Join(filepath.Dir(reportPath), report.TimelineFile)} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return ReadTimelineFile(p)
		}
	}
	return nil, nil
}

// rowHeight is the filled part of a row (the rest separates rows).
const rowHeight = 0.8

// ticksAt labels rows at their middles.
type ticksAt []plot.Tick

func (t ticksAt) Ticks(_, _ float64) []plot.Tick { return t }

// rect is one phase's share of one interval, in the figure's data coordinates.
type rect struct {
	X0, X1, Y0, Y1 float64
	Phase          string
}

// timelineRects lays the rows out top-down (row i of n at y = n−1−i): each interval's phases
// stacked bottom-up in timelinePhases' order, a share s taking s·rowHeight, never past the row.
func timelineRects(rows []TimelineRow, n int) []rect {
	var out []rect
	for i, b := range rows {
		base := float64(n - 1 - i)
		for _, iv := range b.Intervals {
			y := base
			for _, ph := range timelinePhases {
				sh := iv.Share[ph.name]
				if sh <= 0 {
					continue
				}
				h := math.Min(sh*rowHeight, base+rowHeight-y)
				if h <= 0 {
					break
				}
				out = append(out, rect{X0: iv.Start, X1: iv.End, Y0: y, Y1: y + h, Phase: ph.name})
				y += h
			}
		}
	}
	return out
}

// phaseColor is a phase's colour (black for one timelinePhases does not know).
func phaseColor(name string) color.Color {
	for _, ph := range timelinePhases {
		if ph.name == name {
			return ph.c
		}
	}
	return color.Black
}

func timelinePlot(samples []report.TimelineSample, o Options) (*plot.Plot, error) {
	rows, utils := TimelineRows(samples), UtilLines(samples)
	if len(rows) == 0 && len(utils) == 0 {
		return nil, nil
	}
	p := newPlot(o, "GPU time: busy share per phase, and GPU utilisation", "wall time of the GRPO stage (s)", "", false)
	n := len(rows) + len(utils)
	p.Y.Min, p.Y.Max = 0, float64(n)
	var ticks ticksAt
	var tops plotter.XYs // what the legend must not cover
	used := map[string]plot.Thumbnailer{}
	for _, r := range timelineRects(rows, n) {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: r.X0, Y: r.Y0}, {X: r.X1, Y: r.Y0}, {X: r.X1, Y: r.Y1}, {X: r.X0, Y: r.Y1}})
		if err != nil {
			return nil, err
		}
		poly.Color = phaseColor(r.Phase)
		poly.LineStyle.Width = 0
		p.Add(poly)
		if used[r.Phase] == nil {
			used[r.Phase] = poly
		}
		tops = append(tops, plotter.XY{X: r.X0, Y: r.Y1}, plotter.XY{X: r.X1, Y: r.Y1})
	}
	for i, b := range rows {
		label := b.Role + " " + b.Name
		if b.Name == b.Role {
			label = b.Role
		}
		ticks = append(ticks, plot.Tick{Value: float64(n-1-i) + rowHeight/2, Label: label})
	}
	for i, u := range utils {
		base := float64(n - 1 - len(rows) - i)
		xys := make(plotter.XYs, len(u.XYs))
		for k, q := range u.XYs {
			xys[k] = plotter.XY{X: q.X, Y: base + rowHeight*math.Max(0, math.Min(q.Y, 100))/100}
		}
		tops = append(tops, xys...)
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color = palette[i%len(palette)]
		p.Add(line)
		if i == 0 {
			p.Legend.Add("GPU utilisation (nvidia-smi)", line)
		}
		ticks = append(ticks, plot.Tick{Value: base + rowHeight/2, Label: "GPU " + u.Index})
	}
	for _, ph := range timelinePhases {
		if th := used[ph.name]; th != nil {
			p.Legend.Add(ph.name, th)
		}
	}
	p.Y.Tick.Marker = ticks
	p.Legend.Padding = vg.Points(1)
	placeLegend(p, o, tops) // above the top row when it would cover a row
	return p, nil
}
