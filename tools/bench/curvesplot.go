package bench

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// curveAxis names a curve's parameter on the x axis.
var curveAxis = map[string]string{"records": "records loaded", "regions": "regions per server (primaries)", "threads": "client goroutines"}

// curvePanel is one of a curve plot's panels: a quantity per phase.
type curvePanel struct {
	title, unit string
	format      string
	val         func(p *CurvePoint, ph *PhaseResult) float64
	perPhase    bool // one line per phase (else one line: the point's)
}

var curvePanels = []curvePanel{
	{"Throughput", "kops/s", "%.1f", func(_ *CurvePoint, ph *PhaseResult) float64 { return ph.OpsPerSec / 1e3 }, true},
	{"Server CPU per operation", "µs/op", "%.0f", func(_ *CurvePoint, ph *PhaseResult) float64 { return serverCPUPerOp(*ph) }, true},
	{"I/O amplification (device)", "bytes / user byte", "%.2f", func(_ *CurvePoint, ph *PhaseResult) float64 { return ph.IOAmp }, true},
	{"Peak RSS per server (whole run)", "MiB", "%.0f", func(p *CurvePoint, _ *PhaseResult) float64 { return mib(p.PeakRSSPerServer) }, false},
}

// PlotCurve draws curve c as a PNG at path: throughput, server CPU per
// operation, device I/O amplification (one line per phase) and peak
// memory per server against the parameter, every point labelled with
// its value.
func (r *CurvesResult) PlotCurve(c Curve, path string) error {
	if len(c.Points) != len(c.Values) || len(c.Points) == 0 {
		return fmt.Errorf("%w: curve %s has %d values and %d points", ErrBadConfig, c.Parameter, len(c.Values), len(c.Points))
	}
	ticks := make([]string, len(c.Values))
	for i, v := range c.Values {
		ticks[i] = shortCount(v)
	}
	phases := r.phaseNames()
	var rows [][]*plot.Plot
	for _, panel := range curvePanels {
		p := plot.New()
		p.Title.Text = panel.title
		p.Y.Label.Text = panel.unit
		p.X.Label.Text = curveAxis[c.Parameter]
		p.Legend.Top, p.Legend.Left = true, true
		lines := phases
		if !panel.perPhase {
			lines = []string{""}
		}
		// vals[line][point]; NaN where the point lacks the phase.
		vals := make([][]float64, len(lines))
		top := 0.0
		for li, name := range lines {
			for _, idx := range c.Points {
				pt := &r.Points[idx]
				ph := pt.phase(name)
				v := math.NaN()
				if !panel.perPhase || ph != nil {
					v = panel.val(pt, ph)
					top = max(top, v)
				}
				vals[li] = append(vals[li], v)
			}
		}
		for li, name := range lines {
			var xys plotter.XYs
			// Labels above the point where its line is the highest there,
			// else below: two lines' labels never share a side.
			var above, below plotter.XYLabels
			for i, v := range vals[li] {
				if math.IsNaN(v) {
					continue
				}
				xy := plotter.XY{X: float64(i), Y: v}
				xys = append(xys, xy)
				highest := true
				for lj := range lines {
					if lj != li && (vals[lj][i] > v || (vals[lj][i] == v && lj < li)) {
						highest = false
					}
				}
				side := &below
				if highest {
					side = &above
				}
				side.XYs = append(side.XYs, xy)
				side.Labels = append(side.Labels, fmt.Sprintf(panel.format, v))
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			line.Color, points.Color = plotutil.Color(li), plotutil.Color(li)
			points.Shape = plotutil.Shape(li)
			p.Add(line, points)
			for _, side := range []*plotter.XYLabels{&above, &below} {
				if len(side.XYs) == 0 {
					continue
				}
				lab, err := plotter.NewLabels(*side)
				if err != nil {
					return err
				}
				lab.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(3)}
				if side == &below {
					lab.Offset.Y = vg.Points(-11)
				}
				p.Add(lab)
			}
			if name != "" {
				p.Legend.Add(name, line, points)
			}
		}
		p.NominalX(ticks...)
		p.X.Min, p.X.Max = -0.4, float64(len(ticks))-0.6
		p.Y.Min, p.Y.Max = 0, max(top*1.45, 1e-9) // room for the legend above the lines
		rows = append(rows, []*plot.Plot{p})
	}
	img := vgimg.New(7*vg.Inch, vg.Length(2.6*float64(len(rows)))*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(6), PadY: vg.Points(14)}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	return writePNG(path, img)
}
