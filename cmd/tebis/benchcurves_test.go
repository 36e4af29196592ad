package main

import (
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tebis-go/tebis/internal/proctest"
	"github.com/tebis-go/tebis/tools/bench"
)

// TestBenchCurves runs `tebis bench curves` end to end at a tiny scale
// (3 points, 3 server processes each): the JSON has every curve with
// measured points, and every plot is a PNG with something drawn on it.
func TestBenchCurves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 server processes per point")
	}
	bin := proctest.Binary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "curves")
	cmd := exec.Command(bin, "--log-level", "error", "bench", "curves", "--out", out, "--dir", dir,
		"--records", "2000,4000", "--regions", "1,2", "--threads", "4", "--base-threads", "4",
		"--operationcount", "1000", "--l0-pairs", "256", "--segment-size", "256KiB", "--seed", "5")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench curves: %v\n%s", err, b)
	}
	res, err := bench.LoadCurves(filepath.Join(out, "curves.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{"records": {2000, 4000}, "regions": {1, 2}, "threads": {4}}
	if len(res.Curves) != len(want) || len(res.Points) != 3 { // the base point is shared
		t.Fatalf("%d curves, %d points, want 3 and 3:\n%s", len(res.Curves), len(res.Points), b)
	}
	for _, c := range res.Curves {
		w := want[c.Parameter]
		if len(c.Values) != len(w) || c.Values[0] != w[0] || c.Values[len(w)-1] != w[len(w)-1] {
			t.Errorf("curve %s values %v, want %v", c.Parameter, c.Values, w)
		}
	}
	for _, p := range res.Points {
		if len(p.Run.Phases) != 2 || p.Run.Regions != 3*p.RegionsPerServer || len(p.Run.Memory) != 3 || p.PeakRSSPerRegion == 0 {
			t.Fatalf("point %d records, %d regions per server: %d phases, %d regions, %d servers' memory, %d B per region",
				p.Records, p.RegionsPerServer, len(p.Run.Phases), p.Run.Regions, len(p.Run.Memory), p.PeakRSSPerRegion)
		}
		load := p.Run.Phases[0]
		if load.Phase != "Load A" || load.Ops != p.Records || load.OpsPerSec <= 0 || load.ServerCPUSeconds <= 0 || len(load.ServerPeakRSS) != 3 {
			t.Fatalf("point %d records: load phase %+v", p.Records, load)
		}
	}
	for _, name := range []string{"records", "regions", "threads"} {
		path := filepath.Join(out, "curve-"+name+".png")
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r := img.Bounds(); r.Dx() < 400 || r.Dy() < 400 {
			t.Fatalf("%s: %v", path, r)
		}
		if n := inkColors(img); n < 3 {
			t.Fatalf("%s: %d colours drawn, want axes, text and lines", path, n)
		}
	}
}

// inkColors counts the distinct colours of an image other than white.
func inkColors(img image.Image) int {
	seen := map[[4]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			if cr&cg&cb != 0xffff {
				seen[[4]uint32{cr >> 12, cg >> 12, cb >> 12, ca >> 12}] = true
			}
		}
	}
	return len(seen)
}
