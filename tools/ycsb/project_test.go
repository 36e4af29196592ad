package ycsb

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// projectDir holds the YCSB project's own workload files (Apache 2.0,
// its LICENSE.txt beside them), copied unchanged.
const projectDir = "testdata/workloads"

// TestYCSBProjectFiles parses the YCSB project's workloada-f and checks
// each matches our built-in default of the same letter (proportions,
// distributions, scan settings), and that -p style overrides win.
func TestYCSBProjectFiles(t *testing.T) {
	dir := projectDir
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		f, err := os.Open(filepath.Join(dir, "workload"+name))
		if err != nil {
			t.Fatal(err)
		}
		w := Workload{Name: "file " + name}
		unknown, err := ParseProperties(f, &w)
		f.Close()
		if err != nil {
			t.Fatalf("workload%s: %v", name, err)
		}
		for _, k := range unknown {
			if !slices.Contains([]string{"workload", "readallfields", "fieldcount", "fieldlength"}, k) {
				t.Errorf("workload%s: unexpected unknown key %q", name, k)
			}
		}
		b, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		got, want := w.withDefaults(), b.withDefaults()
		if got.ReadProportion != want.ReadProportion || got.UpdateProportion != want.UpdateProportion ||
			got.InsertProportion != want.InsertProportion || got.ScanProportion != want.ScanProportion ||
			got.ReadModifyWriteProportion != want.ReadModifyWriteProportion ||
			got.RequestDistribution != want.RequestDistribution || got.MaxScanLength != want.MaxScanLength ||
			got.ScanLengthDistribution != want.ScanLengthDistribution {
			t.Errorf("workload%s parsed as %+v, built-in %+v", name, got, want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("workload%s: %v", name, err)
		}
	}
}
