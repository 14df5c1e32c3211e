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

	top := plot.New()
	top.Title.Text = title
	top.Y.Label.Text = "SM clock (MHz)"
	top.Y.Min = 0
	l, err := plotter.NewLine(clock)
	if err != nil {
		return fmt.Errorf("powertrace: clock line: %w", err)
	}
	l.Color = clockColor
	top.Add(l)
	top.Legend.Add("SM clock", l)
	if len(capped) > 0 {
		sc, err := plotter.NewScatter(capped)
		if err != nil {
			return fmt.Errorf("powertrace: capped points: %w", err)
		}
		sc.Color, sc.Radius = cappedColor, vg.Points(1.2)
		top.Add(sc)
		top.Legend.Add("held down by the power cap", sc)
	}
	top.Legend.Top, top.Legend.Left = false, true

	bottom := plot.New()
	bottom.X.Label.Text = "seconds"
	bottom.Y.Label.Text = "power (W)"
	bottom.Y.Min = 0
	pl, err := plotter.NewLine(power)
	if err != nil {
		return fmt.Errorf("powertrace: power line: %w", err)
	}
	pl.Color = powerColor
	ll, err := plotter.NewLine(limit)
	if err != nil {
		return fmt.Errorf("powertrace: limit line: %w", err)
	}
	ll.Color, ll.Dashes = limitColor, []vg.Length{vg.Points(4), vg.Points(3)}
	bottom.Add(pl, ll)
	bottom.Legend.Add("draw", pl)
	bottom.Legend.Add("limit", ll)
	bottom.Legend.Top, bottom.Legend.Left = false, true
	for _, p := range []*plot.Plot{top, bottom} { // the same time axis on both panels
		p.X.Min, p.X.Max = 0, clock[len(clock)-1].X
		p.X.Tick.Marker = wholeTicks{}
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
