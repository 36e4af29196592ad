package engine

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// waiterReplicator is a Replicator that says whether writes wait for it.
type waiterReplicator struct{ waits bool }

func (w waiterReplicator) WaitReplicated(uint64) error { return nil }
func (w waiterReplicator) Waits() bool                 { return w.waits }

// TestWritesWait: a write waits in sync mode whatever the replicator,
// and in async mode for a replicator unless it is a Waiter that says it
// does not.
func TestWritesWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode SyncMode
		rep  Replicator
		want bool
	}{
		{"async alone", SyncModeAsync, nil, false},
		{"sync alone", SyncModeSync, nil, true},
		{"async replicator", SyncModeAsync, &blockingReplicator{}, true},
		{"async waiter that waits", SyncModeAsync, waiterReplicator{true}, true},
		{"async waiter that does not", SyncModeAsync, waiterReplicator{false}, false},
		{"sync waiter that does not", SyncModeSync, waiterReplicator{false}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := smallOpts(vfs.NewMem())
			o.SyncMode = tc.mode
			v := mustOpen(t, o)
			defer v.Close()
			r := mustRegion(t, v, 1)
			if tc.rep != nil {
				r.SetReplicator(tc.rep)
			}
			if got := r.WritesWait(); got != tc.want {
				t.Fatalf("WritesWait %v, want %v", got, tc.want)
			}
		})
	}
}
