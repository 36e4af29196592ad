package engine

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type namedRepl struct{ err error }

func (n *namedRepl) WaitReplicated(uint64) error { return n.err }

// TestReplaceReplicator: the swap happens only while the expected
// replicator is installed, and writes wait on whichever is installed at
// their append.
func TestReplaceReplicator(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r := mustRegion(t, v, 1)
	a, b := &namedRepl{}, &namedRepl{err: errors.New("b refuses")}
	if r.ReplaceReplicator(a, b) {
		t.Fatal("replaced a replicator that was not installed (none was)")
	}
	r.SetReplicator(a)
	if err := r.Put(key(1), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if r.ReplaceReplicator(b, nil) {
		t.Fatal("replaced a (not b) as if it were b")
	}
	if !r.ReplaceReplicator(a, b) {
		t.Fatal("a was installed: the swap should happen")
	}
	if err := r.Put(key(2), []byte("x")); err == nil || err.Error() != "b refuses" {
		t.Fatalf("a write after the swap: %v, want b's refusal", err)
	}
	if !r.ReplaceReplicator(b, nil) {
		t.Fatal("b was installed")
	}
	if err := r.Put(key(3), []byte("x")); err != nil {
		t.Fatalf("no replicator: %v", err)
	}
}
