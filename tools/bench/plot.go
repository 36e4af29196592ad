package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// LoadResult reads a JSON result written by WriteJSON or WriteJSONFile.
func LoadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Phases) == 0 {
		return nil, fmt.Errorf("%s: no phases", path)
	}
	return &r, nil
}

// series is one configuration's bars: a file's engine.
type series struct {
	label string
	ops   map[string]float64 // phase -> ops/s
	cpu   map[string]float64 // phase -> cpu µs/op
}

// Plot draws the results as grouped bar charts, like the paper's figure 7:
// throughput (top) and CPU per operation (bottom) for every phase, one bar
// per configuration (a file's engine, labelled "file: engine"). It writes
// a PNG of width x height.
func Plot(paths []string, out string, width, height vg.Length) error {
	var all []series
	var phases []string
	seen := map[string]bool{}
	for _, path := range paths {
		r, err := LoadResult(path)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		byEngine := map[string]*series{}
		var order []string
		for _, p := range r.Phases {
			s, ok := byEngine[p.Engine]
			if !ok {
				label := name + ": " + p.Engine
				if name == p.Engine {
					label = name
				}
				s = &series{label: label, ops: map[string]float64{}, cpu: map[string]float64{}}
				byEngine[p.Engine] = s
				order = append(order, p.Engine)
			}
			s.ops[p.Phase], s.cpu[p.Phase] = p.OpsPerSec, p.CPUPerOp
			if !seen[p.Phase] {
				seen[p.Phase] = true
				phases = append(phases, p.Phase)
			}
		}
		for _, e := range order {
			all = append(all, *byEngine[e])
		}
	}
	top, err := barPlot("Throughput", "kops/s", phases, all, func(s series, ph string) float64 { return s.ops[ph] / 1e3 })
	if err != nil {
		return err
	}
	bottom, err := barPlot("Efficiency", "CPU µs/op", phases, all, func(s series, ph string) float64 { return s.cpu[ph] })
	if err != nil {
		return err
	}
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	return writePNG(out, img)
}

// writePNG writes img to path as a PNG.
func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func barPlot(title, ylabel string, phases []string, all []series, val func(series, string) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	w := vg.Points(60 / float64(max(len(all), 1)))
	for i, s := range all {
		vals := make(plotter.Values, len(phases))
		for j, ph := range phases {
			vals[j] = val(s, ph)
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		bars.LineStyle.Width = vg.Length(0)
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(len(all)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.label, bars)
	}
	p.NominalX(phases...)
	p.X.Min, p.X.Max = -0.7, float64(len(phases))-0.3
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	return p, nil
}
