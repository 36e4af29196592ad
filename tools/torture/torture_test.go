package torture

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/proctest"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/internal/zkserver"
)

// TestTortureCoversEveryNemesis is the bounded schedule CI runs (about 5
// minutes): a 3-server ZooKeeper ensemble, two masters and four region
// servers (in namespaces when root), every nemesis kind injected once in
// a seeded order, both workloads checked. Its seed replays with -seed.
//
// The servers run the default segments (2 MiB) and an L0 of 16K pairs
// instead of 96K: the set writers' ~1 KB values fill an L0 with 16 MiB of
// log (8 segments), so, as at the default size, log segments fill and
// are sealed between two L0 compactions; the scaled L0 makes compactions,
// index shipping and the freeing and reuse of log segments happen during
// the faults instead of once a run.
//
// TEBIS_TORTURE_ARTIFACTS names a directory that keeps the run's report,
// plot, logs and a violation's evidence (default: removed after a pass).
func TestTortureCoversEveryNemesis(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5-minute cluster run")
	}
	if err := zkserver.Installed(); err != nil {
		t.Skipf("zookeeper: %v (make deps installs it)", err)
	}
	seed := testseed.Seed(t)
	dir := os.Getenv("TEBIS_TORTURE_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "tebis-torture-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !t.Failed() {
				os.RemoveAll(dir)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Binary: proctest.Binary(t), Dir: dir, Seed: seed, Duration: time.Second, Cover: true,
		ZooKeepers: 3, Servers: 4, L0Pairs: 16384, Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("run: %v (files in %s)", err, dir)
	}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", b.String())
	kinds, _, _ := kindsFor(nil, canNetns(), os.Geteuid() == 0, 3)
	for _, k := range kinds {
		if res.Faults[k] == 0 {
			t.Errorf("nemesis %s never injected", k)
		}
	}
	if res.Ops["insert"] == 0 || res.Ops["get"] == 0 || res.Checked["register"] == 0 || res.Checked["set"] == 0 {
		t.Errorf("the workloads did not run: %v, checked %v", res.Ops, res.Checked)
	}
	if !res.Valid() {
		f, _ := os.ReadFile(filepath.Join(res.Artifacts, "findings.txt"))
		t.Fatalf("violations %v; artifacts in %s; findings:\n%.4000s", res.Violations, res.Artifacts, f)
	}
	if _, err := os.Stat(res.Timeline); err != nil {
		t.Errorf("no timeline: %v", err)
	}
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
