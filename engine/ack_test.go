package engine

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// syncCountingFS counts the data file's fdatasyncs and fails them while
// fail is set.
func syncCountingFS() (vfs.FS, *atomic.Int64, *atomic.Bool) {
	var syncs atomic.Int64
	var fail atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSyncData && strings.HasSuffix(op.Path, dataFileName) {
			syncs.Add(1)
			if fail.Load() {
				return syscall.EIO
			}
		}
		return nil
	})
	return errorfs.Wrap(vfs.NewMem(), inj), &syncs, &fail
}

// TestFlushToSkipsCoveredPosition: a flush for a position another flush
// covered while it waited for syncMu does not write and fdatasync again,
// though later records are not durable yet.
func TestFlushToSkipsCoveredPosition(t *testing.T) {
	fs, syncs, _ := syncCountingFS()
	o := smallOpts(fs)
	o.SyncMode = SyncModeSync
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	if err := r.ApplyPut(key(1), []byte("a")); err != nil {
		t.Fatal(err)
	}
	pos := r.log.pos()
	if err := r.log.flushTo(0, false); err != nil {
		t.Fatal(err)
	}
	if err := r.ApplyPut(key(2), []byte("b")); err != nil { // not durable
		t.Fatal(err)
	}
	before := syncs.Load()
	if err := r.log.flushTo(pos, true); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load() - before; n != 0 {
		t.Fatalf("a flush for a durable position ran %d fdatasyncs", n)
	}
	if err := r.log.syncHere(r.log.pos()); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load() - before; n != 1 || r.log.durable.Load() < r.log.pos() {
		t.Fatalf("syncHere to the end: %d fdatasyncs, durable %d of %d", n, r.log.durable.Load(), r.log.pos())
	}
}

// TestTryPutOnceLaterFailedLog: a write acknowledged later in sync mode
// whose group commit fails gets the log's failure, not an acknowledgement.
func TestTryPutOnceLaterFailedLog(t *testing.T) {
	fs, _, fail := syncCountingFS()
	o := smallOpts(fs)
	o.SyncMode = SyncModeSync
	o.L0Pairs = 1 << 20
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	fail.Store(true)
	done := make(chan error, 1)
	ok, later, err := tryPutTaken(r, key(1), []byte("v"), RequestID{}, func(err error) { done <- err })
	if err != nil {
		t.Fatal(err)
	}
	if !ok || !later {
		t.Fatalf("ok %v later %v, want both", ok, later)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrVolumeFailed) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("acknowledged with %v, want ErrVolumeFailed wrapping EIO", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not answered")
	}
}
