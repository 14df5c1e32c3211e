package figures

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"tau2rl/schemas"
	"tau2rl/schemas/report"
	"tau2rl/schemas/steplog"
)

func traj(id, domain, task string, v int64, reward float64, ended time.Time) *schemas.Trajectory {
	return &schemas.Trajectory{ID: id, Domain: domain, TaskID: task, PolicyVersionStart: v, Reward: reward, EndedAt: ended,
		Termination: schemas.TerminationAgentStop, Status: schemas.StatusOK}
}

func TestRewardByVersion(t *testing.T) {
	t0 := time.Unix(0, 0)
	trajs := []*schemas.Trajectory{
		traj("a", "airline", "1", 2, 1, t0), traj("b", "airline", "1", 2, 0, t0),
		traj("c", "airline", "1", 0, 1, t0),
	}
	got := RewardByVersion(trajs)
	if len(got) != 2 || got[0].X != 0 || got[1].X != 2 {
		t.Fatalf("%+v", got)
	}
	// v0: one episode, no band. v2: mean 0.5, sample std √0.5, SE 0.5, half-width 1.96·0.5.
	if got[0].Y != 1 || got[0].Lo != 1 || got[0].Hi != 1 || got[0].N != 1 {
		t.Fatalf("v0 %+v", got[0])
	}
	if got[1].Y != 0.5 || math.Abs(got[1].Hi-(0.5+0.98)) > 1e-9 || math.Abs(got[1].Lo-(0.5-0.98)) > 1e-9 {
		t.Fatalf("v2 %+v", got[1])
	}
}

func TestPassKByDomain(t *testing.T) {
	t0 := time.Unix(0, 0)
	var trajs []*schemas.Trajectory
	// airline task 1 succeeds 2 of 4 times: pass^1 0.5, pass^2 C(2,2)/C(4,2) = 1/6.
	for i, r := range []float64{1, 1, 0, 0} {
		trajs = append(trajs, traj(string(rune('a'+i)), "airline", "1", 0, r, t0))
	}
	got := PassKByDomain(trajs, 2)
	if len(got) != 1 || got[0].Domain != "airline" || len(got[0].PassK) != 2 ||
		math.Abs(got[0].PassK[0]-0.5) > 1e-9 || math.Abs(got[0].PassK[1]-1.0/6) > 1e-9 {
		t.Fatalf("%+v", got)
	}
}

func TestThroughputFillsIdleMinutes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	trajs := []*schemas.Trajectory{traj("a", "x", "1", 0, 1, t0.Add(10*time.Second)), traj("b", "x", "1", 0, 1, t0.Add(130*time.Second))}
	got := Throughput(trajs)
	if len(got) != 3 || got[0].Episodes != 1 || got[1].Episodes != 0 || got[2].Episodes != 1 {
		t.Fatalf("%+v", got)
	}
	if Throughput(nil) != nil {
		t.Fatal("no episodes, no rates")
	}
}

func TestMismatchKeepsLastRecordPerStep(t *testing.T) {
	recs := []steplog.Record{
		{Kind: "grpo", Step: 1, Metrics: map[string]float64{"behav_abs_diff": 0.5}},
		{Kind: "sft", Step: 1, Metrics: map[string]float64{"loss": 3}},
		{Kind: "grpo", Step: 2, Metrics: map[string]float64{"behav_abs_diff": 0.2, "behav_cap_fraction": 0.1}},
		{Kind: "grpo", Step: 1, Metrics: map[string]float64{"behav_abs_diff": 0.4}}, // re-run after a restart
	}
	got := Mismatch(recs)
	if len(got) != 2 || got[0].AbsDiff != 0.4 || got[1].CapMasked != 0.1 {
		t.Fatalf("%+v", got)
	}
}

func TestDrawRejectsUnknownFormat(t *testing.T) {
	if _, err := Draw(t.TempDir(), Input{}, Options{Formats: []string{"pdf"}}); err == nil {
		t.Fatal("pdf accepted")
	}
	files, err := Draw(t.TempDir(), Input{}, Options{})
	if err != nil || len(files) != 0 {
		t.Fatalf("empty input: %v %v", files, err)
	}
}

// TestPlaceLegend: the legend goes to the corner the data leave empty, top right when they all
// do; when none is empty it goes on top and the y axis leaves room, so it never covers a point.
func TestPlaceLegend(t *testing.T) {
	rising := plotter.XYs{{X: 0, Y: 0.1}, {X: 1, Y: 0.3}, {X: 2, Y: 0.6}, {X: 3, Y: 0.95}, {X: 4, Y: 1}}
	falling := plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 0.9}, {X: 2, Y: 0.5}, {X: 3, Y: 0.2}, {X: 4, Y: 0.05}}
	low := plotter.XYs{{X: 0, Y: 0.1}, {X: 4, Y: 0.1}}
	everywhere := plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: 1}, {X: 4, Y: 0}, {X: 4, Y: 1}, {X: 4, Y: 0.99}}
	for _, c := range []struct {
		name      string
		xys       plotter.XYs
		top, left bool
		raised    bool
	}{
		{"rising to 1: top left", rising, true, true, false},
		{"falling from 1: top right", falling, true, false, false},
		{"all low: top right", low, true, false, false},
		{"every corner: the less crowded top corner, with room", everywhere, true, true, true},
	} {
		p := plot.New()
		p.Y.Min, p.Y.Max = 0, 1
		l, err := plotter.NewLine(c.xys)
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l)
		p.Legend.Add("a series with a long name", l)
		p.Legend.Add("another one", l)
		placeLegend(p, Options{}, c.xys)
		if p.Legend.Top != c.top || p.Legend.Left != c.left {
			t.Errorf("%s: legend top %v left %v, want top %v left %v", c.name, p.Legend.Top, p.Legend.Left, c.top, c.left)
		}
		if raised := p.Y.Max > 1; raised != c.raised {
			t.Errorf("%s: y axis up to %v, raised %v, want %v", c.name, p.Y.Max, raised, c.raised)
		}
		if n := legendCovers(p, Options{}, c.xys); n > 0 {
			t.Errorf("%s: the legend covers %d points", c.name, n)
		}
	}
}

// TestMismatchLegendLeavesRoom (issue 27 item 21): the mismatch of a short run (make learn-cpu:
// two steps, its points in the corners) and of a long noisy one; the legend covers no point.
func TestMismatchLegendLeavesRoom(t *testing.T) {
	short := []StepPoint{{Step: 1, AbsDiff: 0.004, CapMasked: 0}, {Step: 2, AbsDiff: 0.0041, CapMasked: 0.001}}
	var long []StepPoint
	for i := 1; i <= 150; i++ {
		long = append(long, StepPoint{Step: int64(i), AbsDiff: 0.001 + 0.003*float64((i*7919)%13)/12})
	}
	for name, pts := range map[string][]StepPoint{"two steps": short, "150 noisy steps": long} {
		p, err := mismatchPlot(pts, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var diff, capped plotter.XYs
		for _, q := range pts {
			diff = append(diff, plotter.XY{X: float64(q.Step), Y: q.AbsDiff})
			capped = append(capped, plotter.XY{X: float64(q.Step), Y: q.CapMasked})
		}
		if n := legendCovers(p, Options{}, diff, capped); n > 0 {
			t.Errorf("%s: the legend covers %d points (y axis up to %v)", name, n, p.Y.Max)
		}
	}
}

func TestTitled(t *testing.T) {
	for in, want := range map[string]string{"": "reward", "One H100": "One H100: reward", "One H100, airline:": "One H100, airline: reward", " run 3 : ": "run 3: reward"} {
		if got := titled(Options{Title: in}, "reward"); got != want {
			t.Errorf("titled(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTaskHeatmap: the diagnosis cells become the tasks × versions figure, with a row per task
// and a column per version (a task missing under a version is a NaN cell, drawn grey), and a
// report.json's diagnosis reaches it through ParseReport.
func TestTaskHeatmap(t *testing.T) {
	cells := []report.Cell{
		{Task: "airline/1", Version: 0, Episodes: 8, Success: 0.25},
		{Task: "airline/1", Version: 3, Episodes: 8, Success: 0.75},
		{Task: "airline/10", Version: 3, Episodes: 4, Success: 1},
	}
	g := newTaskGrid(cells)
	if c, r := g.Dims(); c != 2 || r != 2 || g.task(1) != "airline/1" {
		t.Fatalf("grid %d×%d, top task %q", c, r, g.task(1))
	}
	if g.Z(0, 1) != 0.25 || g.Z(1, 1) != 0.75 || g.Z(1, 0) != 1 || !math.IsNaN(g.Z(0, 0)) {
		t.Errorf("grid values %v", g.z)
	}
	files, err := Draw(t.TempDir(), Input{Tasks: cells}, Options{Formats: []string{"png"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || filepath.Base(files[0]) != "tasks_versions.png" {
		t.Fatalf("files %v", files)
	}
	b, err := json.Marshal(report.Report{GRPO: report.GRPOStats{
		PerVersion: []report.RewardStat{{Version: 0, Episodes: 8, Mean: 0.5}},
		Diagnosis:  report.Diagnosis{Cells: cells},
	}})
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := ParseReport(b, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Tasks) != 3 || in.Tasks[2].Task != "airline/10" {
		t.Errorf("parsed cells %+v", in.Tasks)
	}
}
