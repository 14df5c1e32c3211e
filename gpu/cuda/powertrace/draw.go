package powertrace

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

var (
	clockColor  = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	cappedColor = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	powerColor  = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	limitColor  = color.RGBA{R: 90, G: 90, B: 90, A: 255}
)

// Draw writes the trace as two aligned panels over seconds since the first sample: the SM clock
// (samples the driver marked as power-capped in red) and the power draw against the limit. The
// file's extension picks the format: .svg or .png.
func Draw(path, title string, samples []Sample) error {
	if len(samples) == 0 {
		return fmt.Errorf("powertrace: draw %s: no samples", path)
	}
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("powertrace: draw %s: want a .svg or .png file", path)
	}
	clock, capped, power, limit := series(samples)
	top, bottom := panel(title, "", "SM clock (MHz)"), panel("", "seconds", "power (W)")
	err := addLine(top, "SM clock", clock, clockColor, nil)
	if err == nil && len(capped) > 0 {
		var sc *plotter.Scatter
		if sc, err = plotter.NewScatter(capped); err == nil {
			sc.Color, sc.Radius = cappedColor, vg.Points(1.2)
			top.Add(sc)
			top.Legend.Add("held down by the power cap", sc)
		}
	}
	if err == nil {
		err = addLine(bottom, "draw", power, powerColor, nil)
	}
	if err == nil {
		err = addLine(bottom, "limit", limit, limitColor, []vg.Length{vg.Points(4), vg.Points(3)})
	}
	if err != nil {
		return fmt.Errorf("powertrace: draw %s: %w", path, err)
	}
	for _, p := range []*plot.Plot{top, bottom} { // the same time axis on both panels
		p.X.Min, p.X.Max = 0, clock[len(clock)-1].X
	}

	w, h := 8*vg.Inch, 5*vg.Inch
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if ext == ".svg" {
		canvas = vgsvg.New(w, h)
	} else {
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(120))}
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4),
		PadRight: vg.Points(8), PadY: vg.Points(6)}
	cs := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(cs[0][0])
	bottom.Draw(cs[1][0])

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("powertrace: %w", err)
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("powertrace: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("powertrace: write %s: %w", path, err)
	}
	return nil
}

// panel is one of the figure's two plots: y from 0, whole-number ticks, the legend bottom left.
func panel(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Y.Min = 0
	p.X.Tick.Marker = wholeTicks{}
	p.Legend.Top, p.Legend.Left = false, true
	return p
}

// addLine adds a named line to p (dashed when dashes is not nil).
func addLine(p *plot.Plot, name string, pts plotter.XYs, c color.Color, dashes []vg.Length) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("%s line: %w", name, err)
	}
	l.Color, l.Dashes = c, dashes
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// series turns the samples into the plotted points, x in seconds since the first sample.
func series(samples []Sample) (clock, capped, power, limit plotter.XYs) {
	t0 := samples[0].T
	for _, s := range samples {
		x := s.T.Sub(t0).Seconds()
		clock = append(clock, plotter.XY{X: x, Y: s.SMClock})
		if s.Reasons&ReasonSWPowerCap != 0 {
			capped = append(capped, plotter.XY{X: x, Y: s.SMClock})
		}
		power = append(power, plotter.XY{X: x, Y: s.Power})
		limit = append(limit, plotter.XY{X: x, Y: s.Limit})
	}
	return clock, capped, power, limit
}

// wholeTicks are gonum's default tick positions labelled without decimals (seconds, MHz, W).
type wholeTicks struct{}

func (wholeTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', 0, 64)
		}
	}
	return ticks
}
