package torture

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Timeline image geometry: pixels at the canvas' resolution.
const (
	timelineWidthPx  = 1600
	timelineHeightPx = 900
	timelineDPI      = 96
	// timelineMaxPoints bounds the latency scatter's points.
	timelineMaxPoints = 20000
	// minLatencyMs is the floor of the latency axis (1 µs): a log scale
	// cannot show 0.
	minLatencyMs = 1e-3
)

var (
	okColor     = color.NRGBA{R: 31, G: 90, B: 180, A: 150}
	failedColor = color.NRGBA{R: 210, G: 30, B: 30, A: 220}
	// faultPalette colours the fault kinds in sorted order, cycling
	// past 18 kinds; it avoids the blue and red of the operations.
	faultPalette = []color.NRGBA{
		{R: 255, G: 160, B: 0},   // orange
		{R: 60, G: 170, B: 60},   // green
		{R: 150, G: 80, B: 200},  // purple
		{R: 200, G: 190, B: 0},   // olive yellow
		{R: 0, G: 170, B: 170},   // teal
		{R: 230, G: 100, B: 180}, // pink
		{R: 140, G: 90, B: 40},   // brown
		{R: 120, G: 120, B: 120}, // grey
		{R: 120, G: 200, B: 255}, // sky
		{R: 0, G: 100, B: 60},    // dark green
		{R: 255, G: 110, B: 80},  // salmon
		{R: 90, G: 60, B: 140},   // indigo
		{R: 170, G: 230, B: 80},  // lime
		{R: 200, G: 140, B: 110}, // tan
		{R: 40, G: 40, B: 40},    // near black
		{R: 255, G: 220, B: 120}, // sand
		{R: 170, G: 0, B: 90},    // plum
		{R: 100, G: 140, B: 140}, // slate
	}
)

// faultShadeAlpha is the fault rectangles' opacity; overlapping faults
// show darker.
const faultShadeAlpha = 70

// writeTimeline writes to path a PNG of timelineWidthPx x
// timelineHeightPx pixels showing a run's history over time (seconds
// since the run's start, a time axis shared by both panels):
//
//   - top, titled title: every operation's latency (ms, log scale) at its
//     call time, successful ones as blue dots, failed ones as red crosses;
//     beyond timelineMaxPoints operations a deterministic subset is drawn
//     (evenly spaced in call order, failed operations kept first, up to
//     half the budget);
//   - bottom: throughput, successful and failed operations per second in
//     1 s buckets of their return time (At+Latency), as lines.
//
// Every fault is a translucent rectangle from its Start to its End in both
// panels, coloured by kind (a fault with End before Start, not healed,
// runs to the end of the axis); a legend at the right names the series
// and the fault kinds. An empty history (no operations, no faults) still
// gives a valid image: empty axes, the title saying "no operations".
// Latencies below 1 µs are drawn at 1 µs. The errors are those of
// creating and writing the file.
func writeTimeline(path string, ops []opSample, faults []faultSpan, title string) error {
	// The time axis: from 0 to the last return or fault end.
	var tMax time.Duration
	for _, op := range ops {
		tMax = max(tMax, op.At+op.Latency, op.At)
	}
	for _, f := range faults {
		tMax = max(tMax, f.Start, f.End)
	}
	xMax := math.Max(tMax.Seconds(), 1)
	if len(ops) == 0 {
		title += " (no operations)"
	}

	kinds := faultKinds(faults)
	shade := &faultShade{faults: faults, colors: kinds}

	latency, err := latencyPlot(ops, shade, title, xMax)
	if err != nil {
		return err
	}
	rate, err := ratePlot(ops, shade, xMax)
	if err != nil {
		return err
	}

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = vg.Points(24)
	legend.Padding = vg.Points(4)
	legend.Add("ok (latency, ops/s)", latency.ok, rate.ok)
	legend.Add("failed (latency, ops/s)", latency.failed, rate.failed)
	for _, k := range sortedKeys(kinds) {
		legend.Add(k, faultThumb{kinds[k]})
	}

	const inch = vg.Inch
	img := vgimg.NewWith(
		vgimg.UseWH(vg.Length(timelineWidthPx)/timelineDPI*inch, vg.Length(timelineHeightPx)/timelineDPI*inch),
		vgimg.UseDPI(timelineDPI),
	)
	dc := draw.New(img)
	pad := vg.Points(10)
	legendW := legend.Rectangle(dc).Size().X + 2*pad
	plots := draw.Crop(dc, 0, -legendW, 0, 0)
	legendC := draw.Crop(dc, dc.Max.X-dc.Min.X-legendW+pad, -pad, pad, -pad-vg.Points(24))
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad, PadY: pad}
	canvases := plot.Align([][]*plot.Plot{{latency.p}, {rate.p}}, tiles, plots)
	latency.p.Draw(canvases[0][0])
	rate.p.Draw(canvases[1][0])
	legend.Draw(legendC)

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// faultKinds maps each fault kind to its shading colour, assigned in the
// kinds' sorted order.
func faultKinds(faults []faultSpan) map[string]color.NRGBA {
	seen := map[string]color.NRGBA{}
	for _, f := range faults {
		seen[f.Kind] = color.NRGBA{}
	}
	for i, k := range sortedKeys(seen) {
		c := faultPalette[i%len(faultPalette)]
		c.A = faultShadeAlpha
		seen[k] = c
	}
	return seen
}

// panel is one of the timeline's plots and the plotters the legend shows.
type panel struct {
	p          *plot.Plot
	ok, failed plot.Thumbnailer
}

// latencyPlot is the top panel: the latency scatter over the faults.
func latencyPlot(ops []opSample, shade *faultShade, title string, xMax float64) (panel, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "latency (ms)"
	p.X.Label.Text = "time since start (s)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = decadeTicks{}
	p.Add(shade, plotter.NewGrid())

	var okPts, failedPts plotter.XYs
	yMin, yMax := math.Inf(1), math.Inf(-1)
	for _, op := range sampleOps(ops, timelineMaxPoints) {
		ms := math.Max(float64(op.Latency)/float64(time.Millisecond), minLatencyMs)
		yMin, yMax = math.Min(yMin, ms), math.Max(yMax, ms)
		pt := plotter.XY{X: op.At.Seconds(), Y: ms}
		if op.OK {
			okPts = append(okPts, pt)
		} else {
			failedPts = append(failedPts, pt)
		}
	}
	ok, err := plotter.NewScatter(okPts)
	if err != nil {
		return panel{}, err
	}
	ok.GlyphStyle = draw.GlyphStyle{Color: okColor, Radius: vg.Points(1.5), Shape: draw.CircleGlyph{}}
	failed, err := plotter.NewScatter(failedPts)
	if err != nil {
		return panel{}, err
	}
	failed.GlyphStyle = draw.GlyphStyle{Color: failedColor, Radius: vg.Points(2.5), Shape: draw.CrossGlyph{}}
	p.Add(ok, failed)

	// Whole decades, so that the log ticks are labelled, with room for
	// the glyphs at the extremes.
	if math.IsInf(yMin, 0) {
		yMin, yMax = 1, 1000
	}
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(yMin/1.5)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(yMax*1.5)))
	p.X.Min, p.X.Max = 0, xMax
	p.X.Tick.Marker = linearTicks{}
	return panel{p: p, ok: ok, failed: failed}, nil
}

// ratePlot is the bottom panel: successful and failed operations per
// second, in 1 s buckets of their return time, over the faults.
func ratePlot(ops []opSample, shade *faultShade, xMax float64) (panel, error) {
	p := plot.New()
	p.Title.Text = "throughput (1 s buckets)"
	p.Y.Label.Text = "ops/s"
	p.X.Label.Text = "time since start (s)"
	p.Add(shade, plotter.NewGrid())

	n := int(math.Ceil(xMax))
	okN, failedN := make([]int, n), make([]int, n)
	for _, op := range ops {
		b := min(max(int((op.At+op.Latency)/time.Second), 0), n-1)
		if op.OK {
			okN[b]++
		} else {
			failedN[b]++
		}
	}
	peak := 0
	okPts, failedPts := make(plotter.XYs, n), make(plotter.XYs, n)
	for b := range n {
		x := float64(b) + 0.5
		okPts[b] = plotter.XY{X: x, Y: float64(okN[b])}
		failedPts[b] = plotter.XY{X: x, Y: float64(failedN[b])}
		peak = max(peak, okN[b], failedN[b])
	}
	ok, err := plotter.NewLine(okPts)
	if err != nil {
		return panel{}, err
	}
	ok.LineStyle = draw.LineStyle{Color: opaque(okColor), Width: vg.Points(1.5)}
	failed, err := plotter.NewLine(failedPts)
	if err != nil {
		return panel{}, err
	}
	failed.LineStyle = draw.LineStyle{Color: opaque(failedColor), Width: vg.Points(1.5)}
	if len(ops) > 0 {
		p.Add(ok, failed)
	}
	p.X.Min, p.X.Max = 0, xMax
	p.X.Tick.Marker = linearTicks{}
	p.Y.Min, p.Y.Max = 0, math.Max(float64(peak)*1.05, 1)
	p.Y.Tick.Marker = linearTicks{}
	return panel{p: p, ok: ok, failed: failed}, nil
}

// decadeTicks marks a log axis whose bounds are powers of ten: every
// power of ten labelled, its multiples 2..9 unlabelled. (plot.LogTicks
// loses the lowest decade to rounding when the bound is below 1.)
type decadeTicks struct{}

// Ticks implements plot.Ticker.
func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0 && hi > lo) {
		return nil
	}
	var ticks []plot.Tick
	for e := int(math.Round(math.Log10(lo))); e <= int(math.Round(math.Log10(hi))); e++ {
		v := math.Pow10(e)
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		for m := 2; m < 10; m++ {
			if mv := float64(m) * v; mv <= hi {
				ticks = append(ticks, plot.Tick{Value: mv})
			}
		}
	}
	return ticks
}

// linearTicks marks a linear axis every 1, 2 or 5 times a power of ten,
// about ten labelled ticks over the range, with unlabelled ticks between
// them; the labels carry no more decimals than the step needs.
type linearTicks struct{}

// Ticks implements plot.Ticker.
func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return nil
	}
	raw := (hi - lo) / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step, minor := mag, mag/5
	switch {
	case raw > 5*mag:
		step, minor = 10*mag, 2*mag
	case raw > 2*mag:
		step, minor = 5*mag, mag
	case raw > mag:
		step, minor = 2*mag, mag/2
	}
	decimals := max(0, -int(math.Floor(math.Log10(step))))
	perMajor := int(math.Round(step / minor))
	var ticks []plot.Tick
	for i := int(math.Ceil(lo / minor)); float64(i)*minor <= hi*(1+1e-12); i++ {
		v := float64(i) * minor
		t := plot.Tick{Value: v}
		if i%perMajor == 0 {
			t.Label = strconv.FormatFloat(v, 'f', decimals, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

func opaque(c color.NRGBA) color.NRGBA {
	c.A = 255
	return c
}

// sampleOps returns ops sorted by call time, or, beyond limit operations,
// a deterministic subset of limit: the failed operations, at most half the
// budget, and the successful ones in the rest, each evenly spaced over its
// class in call order.
func sampleOps(ops []opSample, limit int) []opSample {
	sorted := make([]opSample, len(ops))
	copy(sorted, ops)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At < sorted[j].At })
	if len(sorted) <= limit {
		return sorted
	}
	var okOps, failedOps []opSample
	for _, op := range sorted {
		if op.OK {
			okOps = append(okOps, op)
		} else {
			failedOps = append(failedOps, op)
		}
	}
	failedN := min(len(failedOps), limit/2)
	okN := min(len(okOps), limit-failedN)
	out := append(spread(okOps, okN), spread(failedOps, failedN)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// spread returns k elements of s evenly spaced, the first included.
func spread(s []opSample, k int) []opSample {
	if k >= len(s) {
		return s
	}
	out := make([]opSample, k)
	for i := range k {
		out[i] = s[i*len(s)/k]
	}
	return out
}

// faultShade draws the faults as translucent rectangles spanning the
// plot's height. It has no data range: the plot's X range must be set.
type faultShade struct {
	faults []faultSpan
	colors map[string]color.NRGBA
}

// Plot implements plot.Plotter.
func (s *faultShade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	minW := vg.Points(1.5) // an instantaneous fault stays visible
	for _, f := range s.faults {
		start, end := f.Start.Seconds(), f.End.Seconds()
		if f.End < f.Start {
			end = p.X.Max
		}
		start, end = math.Max(start, p.X.Min), math.Min(end, p.X.Max)
		if start > end {
			continue
		}
		x0, x1 := trX(start), trX(end)
		if x1-x0 < minW {
			x1 = x0 + minW
		}
		c.FillPolygon(s.colors[f.Kind], []vg.Point{
			{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y},
		})
	}
}

// faultThumb is a fault kind's legend entry: its colour.
type faultThumb struct{ c color.NRGBA }

// Thumbnail implements plot.Thumbnailer.
func (t faultThumb) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(t.c, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}
