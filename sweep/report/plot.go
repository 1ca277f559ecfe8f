package report

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tinyserve/tinyserve/sweep/analysis"
)

// renderPlot draws the sweep as PNG and SVG: output-token throughput (top)
// and p99 latency (bottom) against concurrency, each repeat as a point and
// the repeat median as a line, with the saturation candidate marked.
func renderPlot(c *analysis.Combined) (png, svg []byte, err error) {
	top, err := panel(c, "Output tokens/s", func(a *analysis.LevelAggregate) ([]*float64, *float64) {
		return a.RepeatValues.OutputTokenThroughput, a.RepeatMedians.OutputTokenThroughput
	})
	if err != nil {
		return nil, nil, err
	}
	bottom, err := panel(c, "P99 latency (s)", func(a *analysis.LevelAggregate) ([]*float64, *float64) {
		return a.RepeatValues.LatencyP99S, a.RepeatMedians.LatencyP99S
	})
	if err != nil {
		return nil, nil, err
	}
	name := ""
	if m, ok := c.Config.(map[string]any); ok {
		name, _ = m["name"].(string)
	}
	top.Title.Text = name
	bottom.X.Label.Text = "Concurrency"
	const w, h = 7 * vg.Inch, 7 * vg.Inch
	drawOn := func(dc draw.Canvas) {
		plots := [][]*plot.Plot{{top}, {bottom}}
		tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter * 2, PadY: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
		cs := plot.Align(plots, tiles, dc)
		top.Draw(cs[0][0])
		bottom.Draw(cs[1][0])
	}
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	drawOn(draw.New(img))
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&pb); err != nil {
		return nil, nil, err
	}
	sv := vgsvg.New(w, h)
	drawOn(draw.New(sv))
	var sb bytes.Buffer
	if _, err := sv.WriteTo(&sb); err != nil {
		return nil, nil, err
	}
	return pb.Bytes(), sb.Bytes(), nil
}

func panel(c *analysis.Combined, ylabel string, get func(*analysis.LevelAggregate) ([]*float64, *float64)) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	var pts, med plotter.XYs
	var ticks []plot.Tick
	ymax := 0.0
	for i := range c.ByConcurrency {
		a := &c.ByConcurrency[i]
		x := float64(a.Concurrency)
		ticks = append(ticks, plot.Tick{Value: x, Label: strconv.Itoa(a.Concurrency)})
		vals, m := get(a)
		for _, v := range vals {
			if v != nil && !math.IsNaN(*v) {
				pts = append(pts, plotter.XY{X: x, Y: *v})
				ymax = max(ymax, *v)
			}
		}
		if m != nil && !math.IsNaN(*m) {
			med = append(med, plotter.XY{X: x, Y: *m})
			ymax = max(ymax, *m)
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if len(c.ByConcurrency) > 0 {
		// Levels usually double, so a log axis spaces them evenly. Its range
		// is set here: with no data gonum's default range includes zero,
		// which a log scale cannot draw.
		lo, hi := float64(c.ByConcurrency[0].Concurrency), float64(c.ByConcurrency[len(c.ByConcurrency)-1].Concurrency)
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = lo/1.15, hi*1.15
	}
	p.Y.Min = 0
	if ymax > 0 {
		p.Y.Max = ymax * 1.4 // headroom so the legend does not cover data
	}
	if len(pts) > 0 {
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Radius = vg.Points(2.5)
		s.GlyphStyle.Color = plotColor(1)
		p.Add(s)
		p.Legend.Add("repeat", s)
	}
	if len(med) > 0 {
		l, err := plotter.NewLine(med)
		if err != nil {
			return nil, err
		}
		l.Color = plotColor(0)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add("median of repeats", l)
	}
	if cand := c.Saturation.Candidate; cand != nil && ymax > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: float64(*cand), Y: 0}, {X: float64(*cand), Y: ymax * 1.05}})
		if err != nil {
			return nil, err
		}
		l.Color = plotColor(2)
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("saturation candidate (%d)", *cand), l)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}
