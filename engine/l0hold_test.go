package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestL0Held(t *testing.T) {
	a, b := &replicatorBox{}, &replicatorBox{}
	for _, c := range []struct {
		heldFor, cur *replicatorBox
		quiesced     bool
		want         bool
	}{
		{nil, nil, false, false}, // nothing refused
		{nil, a, true, false},
		{a, a, false, true},   // the refusing replicator is still the region's
		{a, nil, false, true}, // detached: nothing confirms the records
		{a, b, false, false},  // a new replicator: retry
		{a, b, true, true},    // but not before the re-attach's Quiesce ends
	} {
		if got := l0Held(c.heldFor, c.cur, c.quiesced); got != c.want {
			t.Errorf("l0Held(%p, %p, %v) = %v, want %v", c.heldFor, c.cur, c.quiesced, got, c.want)
		}
	}
}

// refuser is a Replicator whose WaitReplicated fails (a group that lost
// its backups).
type refuser struct{}

func (refuser) WaitReplicated(uint64) error { return errors.New("test: not replicated") }

type confirmer struct{}

func (confirmer) WaitReplicated(uint64) error { return nil }

// TestL0CompactionWaitsForReplicator: a frozen L0 whose records the
// replicator does not confirm stays L0 (no level has its keys: a level is
// read without asking the replicator); Compact, WaitIdle and Quiesce do
// not wait for it; once another replicator confirms them, the compaction
// runs.
func TestL0CompactionWaitsForReplicator(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r := mustRegion(t, v, 1)
	r.SetReplicator(confirmer{})
	for i := range 10 {
		if err := r.Put(key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	r.SetReplicator(refuser{})
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	for _, l := range r.Levels() {
		if l.Pairs != 0 {
			t.Fatalf("L%d has %d pairs: the L0 entered a level its replicator refused", l.Level, l.Pairs)
		}
	}
	release, err := r.Quiesce()
	if err != nil {
		t.Fatal(err)
	}
	r.SetReplicator(confirmer{}) // a re-attach, under the Quiesce
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	for _, l := range r.Levels() {
		if l.Pairs != 0 {
			t.Fatalf("L%d has %d pairs: compacted while quiesced", l.Level, l.Pairs)
		}
	}
	release()
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	if l := r.Levels(); len(l) == 0 || l[0].Pairs != 10 {
		t.Fatalf("levels after a replicator confirmed the L0: %+v", l)
	}
}

// TestStalledWriterResumesAfterReplicatorChange: with the frozen L0 held
// (its replicator refused it) and the new L0 full, a writer stalls; a
// re-attach (Quiesce, a new replicator, release) does not wait for it, and
// the held compaction then runs and lets the writer go on.
func TestStalledWriterResumesAfterReplicatorChange(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	r.SetReplicator(refuser{})
	for i := range 2 * o.L0Pairs { // refused, appended: the first L0 freezes and is held, the second fills
		if err := r.Put(key(i), []byte("v")); err == nil {
			t.Fatalf("put %d acknowledged by a refusing replicator", i)
		}
	}
	stalled := make(chan error, 1)
	go func() { stalled <- r.Put(key(-1), []byte("v")) }()
	select {
	case err := <-stalled:
		t.Fatalf("a write into a full L0 behind a held one did not stall: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	release, err := r.Quiesce()
	if err != nil {
		t.Fatal(err)
	}
	r.SetReplicator(confirmer{})
	release()
	select {
	case err := <-stalled:
		if err != nil {
			t.Fatalf("the stalled write after the new replicator: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled write did not go on after a replicator confirmed the held L0")
	}
	if l := r.Levels(); len(l) == 0 || l[0].Pairs == 0 {
		t.Fatalf("the held L0 was not compacted: %+v", l)
	}
}
