package engine

import (
	"errors"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestDemoteRegion: a primary with levels, a multi-segment log and L0
// content is demoted: the old handle is closed, the region is an empty
// backup at the new epoch (also after a reopen), its segments go back to
// the allocator once a scan open across the demotion is closed (another
// region writing meanwhile does not disturb it), other regions are untouched,
// and the volume checks clean. Refusals change nothing.
func TestDemoteRegion(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	fs := vfs.NewMem()
	o := smallOpts(fs)
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	other := mustRegion(t, v, 2)
	for i := range 3000 {
		if err := r.Put(key(rng.Intn(1500)), make([]byte, 10+rng.Intn(80))); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := other.Put(key(i), []byte("o")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	if len(r.Levels()) == 0 || len(r.LogSegments()) < 3 {
		t.Fatalf("setup: %d levels, %d log segments", len(r.Levels()), len(r.LogSegments()))
	}
	scan := r.Scan(nil, nil) // a read in progress across the demotion
	if _, err := v.DemoteRegion(1, 0); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("demotion to an epoch not newer: %v", err)
	}
	if _, err := v.DemoteRegion(9, 5); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("demotion of an unknown region: %v", err)
	}
	b, err := v.DemoteRegion(1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.DemoteRegion(1, 6); !errors.Is(err, ErrBackupRegion) {
		t.Fatalf("demotion of a backup: %v", err)
	}
	if err := r.Put(key(1), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("put on the demoted handle: %v", err)
	}
	// Another region writing meanwhile cannot reuse what the scan reads.
	third := mustRegion(t, v, 3)
	for i := range 3000 {
		if err := third.Put(key(i), make([]byte, 80)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for scan.Next() {
		n++
	}
	held, _ := v.alloc.usage()
	if err := scan.Close(); err != nil || n == 0 {
		t.Fatalf("a scan open across the demotion: %d pairs, %v", n, err)
	}
	if after, _ := v.alloc.usage(); after >= held {
		t.Fatalf("segments in use: %d while the old scan ran, %d after it closed", held, after)
	}
	check := func(b *Backup) {
		t.Helper()
		if _, ok := v.Region(1); ok {
			t.Fatal("demoted: the volume holds region 1 as a primary")
		}
		if got, ok := v.Backup(1); !ok || got != b {
			t.Fatalf("demoted: the volume holds backup %p, want %p", got, b)
		}
		if b.Desc().Epoch != 5 || len(b.LogSegments()) != 0 {
			t.Fatalf("demoted: epoch %d log %v", b.Desc().Epoch, b.LogSegments())
		}
		for _, l := range b.Levels() {
			if l.Root != 0 {
				t.Fatalf("demoted region has level %+v", l)
			}
		}
		if _, err := b.Get(key(1)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get on the demoted region: %v", err)
		}
	}
	check(b)
	if got, err := other.Get(key(0)); err != nil || string(got) != "o" {
		t.Fatalf("other region: %q, %v", got, err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = mustOpen(t, o)
	defer v.Close()
	b, ok := v.Backup(1)
	if !ok {
		t.Fatal("demoted region missing after reopen")
	}
	check(b)
	v.Close()
	in, err := OpenInspector(fs, o.Dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if rep := in.Check(); len(rep.Problems) != 0 {
		t.Fatalf("%d problems, first %+v", len(rep.Problems), rep.Problems[0])
	}
}
