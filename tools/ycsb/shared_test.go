package ycsb

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// sharedDir is the YCSB project's own workload files, beside the repository.
func sharedDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "ycsb-workloads")
	if _, err := os.Stat(filepath.Join(dir, "workloada")); err != nil {
		t.Fatalf("the YCSB workload files are expected in %s: %v", dir, err)
	}
	return dir
}

// TestYCSBProjectFiles parses the YCSB project's workloada-f and checks
// each matches our built-in default of the same letter (proportions,
// distributions, scan settings), and that -p style overrides win.
func TestYCSBProjectFiles(t *testing.T) {
	dir := sharedDir(t)
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
