package figures

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gonum.org/v1/plot/vg"

	"tau2rl/schemas/report"
)

func readTestTimeline(t *testing.T) []report.TimelineSample {
	t.Helper()
	s, err := ReadTimelineFile("testdata/gputime.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTimelineRows: testdata/gputime.jsonl (a sampler and the trainer read at 0, 2 and 4 s)
// gives each process two intervals with the shares worked out by hand; GPU readings become a
// utilisation line.
func TestTimelineRows(t *testing.T) {
	samples := readTestTimeline(t)
	rows := TimelineRows(samples)
	if len(rows) != 2 || rows[0].Role != report.RoleSampler || rows[1].Role != report.RoleTrainer {
		t.Fatalf("rows %+v", rows)
	}
	want := [][]map[string]float64{
		{{"decode": 0.5, "prefill": 0.1, "mixed": 0.1, "weight_update": 0}, {"decode": 0.25, "prefill": 0.05, "mixed": 0.05, "weight_update": 0.1}},
		{{"train": 0, "recompute": 0, "checkpoint": 0, "weight_sync": 0, "waiting": 0.95},
			{"train": 0.5, "recompute": 0.1, "checkpoint": 0.1, "weight_sync": 0.1, "waiting": 0.15}},
	}
	for i, r := range rows {
		if len(r.Intervals) != 2 || r.Intervals[0].Start != 0 || r.Intervals[1].End != 4 {
			t.Fatalf("%s intervals %+v", r.Role, r.Intervals)
		}
		for k, iv := range r.Intervals {
			for p, v := range want[i][k] {
				if math.Abs(iv.Share[p]-v) > 1e-9 {
					t.Errorf("%s interval %d %s: %v, want %v", r.Role, k, p, iv.Share[p], v)
				}
			}
		}
	}
	u := UtilLines(samples)
	if len(u) != 1 || u[0].Index != "0" || len(u[0].XYs) != 4 || u[0].XYs[3].Y != 20 {
		t.Fatalf("utilisation %+v", u)
	}
}

// TestTimelineRects: each phase's rectangle spans its interval, is share × rowHeight tall, stays
// inside its row, and the phases of an interval stack without overlap in a fixed order; shares
// summing past 1 (timer rounding) are cut at the row's top.
func TestTimelineRects(t *testing.T) {
	rows := TimelineRows(readTestTimeline(t))
	rows = append(rows, TimelineRow{Role: "sampler", Name: "over", Intervals: []Interval{{Start: 0, End: 1, Share: map[string]float64{"decode": 0.7, "prefill": 0.7}}}})
	n := len(rows) + 1 // and a GPU row
	rects := timelineRects(rows, n)
	byRow := map[int][]rect{}
	for _, r := range rects {
		row := n - 1 - int(math.Floor(r.Y0))
		byRow[row] = append(byRow[row], r)
		base := math.Floor(r.Y0)
		if r.Y1 > base+rowHeight+1e-9 || r.Y1 <= r.Y0 || r.X1 <= r.X0 {
			t.Errorf("rect %+v leaves its row", r)
		}
	}
	// The sampler's first interval: decode 0.5, prefill 0.1, mixed 0.1 stacked from the row's
	// bottom (row 0 of 4 sits at y = 3).
	first := byRow[0][:3]
	wantPhases := []string{"decode", "prefill", "mixed"}
	for k, r := range first {
		if r.Phase != wantPhases[k] || r.X0 != 0 || r.X1 != 2 {
			t.Fatalf("sampler's first interval: %+v", first)
		}
	}
	if math.Abs(first[0].Y0-3) > 1e-9 || math.Abs(first[0].Y1-(3+0.5*rowHeight)) > 1e-9 || first[1].Y0 != first[0].Y1 || first[2].Y0 != first[1].Y1 {
		t.Errorf("stacking %+v", first)
	}
	over := byRow[2]
	if len(over) != 2 || math.Abs(over[1].Y1-(1+rowHeight)) > 1e-9 {
		t.Errorf("overfull interval not cut at the row's top: %+v", over)
	}
}

// TestTimelineFigure: Draw writes gputime when the input has a timeline and not otherwise; a
// report.json whose timeline path is gone finds gputime.jsonl beside it (a run directory copied
// off the GPU machine), and one without a timeline draws no gputime figure.
func TestTimelineFigure(t *testing.T) {
	samples := readTestTimeline(t)
	p, err := timelinePlot(samples, Options{Width: 16 * vg.Centimeter, Height: 10 * vg.Centimeter})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		labels = append(labels, tk.Label)
	}
	if !slices.Equal(labels, []string{"sampler 127.0.0.1:9001", "trainer", "GPU 0"}) {
		t.Errorf("rows %v", labels)
	}
	files, err := Draw(t.TempDir(), Input{Timeline: samples}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || filepath.Base(files[0]) != "gputime.png" || filepath.Base(files[1]) != "gputime.svg" {
		t.Fatalf("files %v", files)
	}

	dir := t.TempDir()
	b, err := os.ReadFile("testdata/gputime.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, report.TimelineFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := report.Report{GRPO: report.GRPOStats{PerVersion: []report.RewardStat{{Version: 0, Episodes: 2, Mean: 0.5}},
		GPUTime: &report.GPUTime{Timeline: "/gone/run/gputime.jsonl"}}}
	for _, c := range []struct {
		name     string
		timeline bool
		want     int
	}{{"beside the report", true, len(samples)}, {"no timeline", false, 0}} {
		rdir := t.TempDir()
		if c.timeline {
			rdir = dir
		}
		rb, _ := json.Marshal(rep)
		path := filepath.Join(rdir, "report.json")
		if err := os.WriteFile(path, rb, 0o644); err != nil {
			t.Fatal(err)
		}
		in, _, _, err := FromReport(path, 4)
		if err != nil || len(in.Timeline) != c.want {
			t.Errorf("%s: %d samples, %v; want %d", c.name, len(in.Timeline), err, c.want)
		}
	}
}
