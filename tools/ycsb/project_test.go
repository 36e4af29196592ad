package ycsb

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestYCSBProjectFiles parses the YCSB project's workloada-f, as
// OpenProperties gives them by name (built in), and checks each matches
// our built-in default of the same letter (proportions, distributions,
// scan settings), and that -p style overrides win.
func TestYCSBProjectFiles(t *testing.T) {
	if got := ProjectWorkloads(); !slices.Equal(got, []string{"workloada", "workloadb", "workloadc", "workloadd", "workloade", "workloadf"}) {
		t.Fatalf("built-in project workloads %v", got)
	}
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		f, err := OpenProperties("workload" + name)
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

// TestOpenPropertiesFileFirst: a file at the path wins over the built-in
// workload of the same name; a path that is neither is ErrNoPropertyFile.
func TestOpenPropertiesFileFirst(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "workloada")
	if err := os.WriteFile(own, []byte("readproportion=0.25\nupdateproportion=0.75\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenProperties(own)
	if err != nil {
		t.Fatal(err)
	}
	w := Workload{}
	_, err = ParseProperties(f, &w)
	f.Close()
	if err != nil || w.ReadProportion != 0.25 {
		t.Fatalf("own workloada: read proportion %v (%v), want the file's 0.25", w.ReadProportion, err)
	}
	f, err = OpenProperties(filepath.Join(dir, "workloads", "workloadc"))
	if err != nil {
		t.Fatalf("workloadc by a path with no file: %v", err)
	}
	f.Close()
	if _, err := OpenProperties(filepath.Join(dir, "workloadz")); !errors.Is(err, ErrNoPropertyFile) {
		t.Fatalf("workloadz: %v, want ErrNoPropertyFile", err)
	}
}
