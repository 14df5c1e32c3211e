package figures

import (
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"tau2rl/schemas/report"
)

// taskGrid is the success rate of each task (rows) under each policy version (columns); a task
// with no episode under a version is NaN (drawn grey).
type taskGrid struct {
	tasks    []string
	versions []int64
	z        [][]float64 // [task][version]
}

func newTaskGrid(cells []report.Cell) taskGrid {
	var g taskGrid
	ti, vi := map[string]int{}, map[int64]int{}
	for _, c := range cells {
		if _, ok := ti[c.Task]; !ok {
			ti[c.Task] = 0
			g.tasks = append(g.tasks, c.Task)
		}
		if _, ok := vi[c.Version]; !ok {
			vi[c.Version] = 0
			g.versions = append(g.versions, c.Version)
		}
	}
	sort.Strings(g.tasks)
	sort.Slice(g.versions, func(i, j int) bool { return g.versions[i] < g.versions[j] })
	for i, t := range g.tasks {
		ti[t] = i
	}
	for i, v := range g.versions {
		vi[v] = i
	}
	g.z = make([][]float64, len(g.tasks))
	for i := range g.z {
		g.z[i] = make([]float64, len(g.versions))
		for j := range g.z[i] {
			g.z[i][j] = math.NaN()
		}
	}
	for _, c := range cells {
		if c.Episodes > 0 {
			g.z[ti[c.Task]][vi[c.Version]] = c.Success
		}
	}
	return g
}

// GridXYZ: columns are versions (x = column index), rows tasks (y = row index, first task on top).
func (g taskGrid) Dims() (c, r int)   { return len(g.versions), len(g.tasks) }
func (g taskGrid) Z(c, r int) float64 { return g.z[len(g.tasks)-1-r][c] }
func (g taskGrid) X(c int) float64    { return float64(c) }
func (g taskGrid) Y(r int) float64    { return float64(r) }
func (g taskGrid) Min() float64       { return 0 }
func (g taskGrid) Max() float64       { return 1 }
func (g taskGrid) task(r int) string  { return g.tasks[len(g.tasks)-1-r] }

// maxLabelledCells is the most cells that get their success rate written in them; a larger grid
// (a long run: many versions) is read by its colours.
const maxLabelledCells = 300

// taskHeatmap is the tasks × policy versions figure: each cell the success rate (τ² reward 1) of
// the GRPO episodes of that task started under that version, from black (0) to white (1) on
// Kindlmann's perceptually uniform scale, written in the cell when the grid is small enough;
// grey where the task had no episode under the version. It shows which tasks the policy learns,
// which it never solves and which it forgets, where the reward curve only shows the mean.
func taskHeatmap(cells []report.Cell, o Options) (*plot.Plot, error) {
	g := newTaskGrid(cells)
	if len(g.tasks) == 0 || len(g.versions) == 0 {
		return nil, nil
	}
	cm := moreland.Kindlmann()
	cm.SetMin(0)
	cm.SetMax(1)
	h := plotter.NewHeatMap(g, cm.Palette(256))
	h.NaN = color.Gray{Y: 0xC8}
	p := plot.New()
	p.Title.Text = titled(o, "success per task and policy version (black 0 → white 1, grey: none)")
	p.X.Label.Text = "policy version at episode start"
	p.Y.Label.Text = "task"
	p.Add(h)
	var yt []plot.Tick
	for r := range g.tasks {
		yt = append(yt, plot.Tick{Value: float64(r), Label: g.task(r)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(yt)
	step := max(1, len(g.versions)/12) // at most about a dozen version labels
	var xt []plot.Tick
	for c, v := range g.versions {
		l := ""
		if c%step == 0 {
			l = fmt.Sprintf("v%d", v)
		}
		xt = append(xt, plot.Tick{Value: float64(c), Label: l})
	}
	p.X.Tick.Marker = plot.ConstantTicks(xt)
	if len(g.tasks)*len(g.versions) <= maxLabelledCells {
		for c := range g.versions {
			for r := range g.tasks {
				z := g.Z(c, r)
				if math.IsNaN(z) {
					continue
				}
				l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: float64(c), Y: float64(r)}}, Labels: []string{fmt.Sprintf("%.2f", z)}})
				if err != nil {
					return nil, err
				}
				l.TextStyle[0].XAlign, l.TextStyle[0].YAlign = -0.5, -0.5
				l.TextStyle[0].Font.Size = vg.Points(7)
				if z < 0.55 { // dark half of the scale: white text
					l.TextStyle[0].Color = color.White
				}
				p.Add(l)
			}
		}
	}
	return p, nil
}
