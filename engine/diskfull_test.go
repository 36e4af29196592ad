package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Full and failing disks (docs/operations.md, "Full or failing disks"): a
// write that cannot be stored fails with ErrNoSpace and nothing is
// poisoned; once space returns the same region takes writes again without
// a reopen, and nothing acknowledged is lost. A failed write or sync
// (EIO) is reported as ErrVolumeFailed by Health and every write.

// fillValue is the value fillUntilFull puts under key index n.
func fillValue(n int) []byte { return []byte(fmt.Sprintf("%0500d", n)) }

// fillUntilFull puts distinct keys (values of fillValue's size) until the
// volume is full; it returns the acknowledged ones (key index -> value),
// the index of the put that found it full and that put's error.
//
// Full means a put failed for want of space with the region's compactions
// settled (settle): a compaction running when a put fails may still free
// segments (the levels it replaces, or the ones of a build that found no
// room), and the volume then takes writes again. A put refused once they
// have settled needed a segment that no background work will free (a
// compaction that waits for space frees nothing until ProbeSpace finds
// room), so every later put of its size is refused too.
func fillUntilFull(t *testing.T, r *Region, from int, acked map[int][]byte) (int, error) {
	t.Helper()
	for n := from; n < from+200000; n++ {
		val := fillValue(n)
		err := r.Put(key(n), val)
		if errors.Is(err, ErrNoSpace) {
			settle(r)
			err = r.Put(key(n), val)
		}
		if err != nil {
			return n, err
		}
		acked[n] = val
	}
	t.Fatal("the volume never filled")
	return 0, nil
}

// settle waits until no compaction attempt of r is running and either
// none is needed or the needed one waits for space (it is retried only
// after spaceRetry or a ProbeSpace that finds room), or r failed or
// closed. An attempt frees what it gives up before it ends: the segments
// of the levels it replaced (no reader holds them here), or those of a
// build that found no room.
func settle(r *Region) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.bgErr == nil && !r.closed && !r.idleLocked() && (r.spaceErr == nil || r.compacting) {
		r.memCond.Wait()
	}
}

func checkAcked(t *testing.T, r *Region, acked map[int][]byte, what string) {
	t.Helper()
	for i, val := range acked {
		if got, err := r.Get(key(i)); err != nil || !bytes.Equal(got, val) {
			t.Fatalf("%s: acknowledged key %d: %q %v", what, i, got, err)
		}
	}
}

// setCapacity changes a capped volume's segment capacity, as if its device
// had grown (0: unlimited).
func setCapacity(v *Volume, n int64) {
	v.alloc.mu.Lock()
	v.alloc.max = n
	v.alloc.mu.Unlock()
}

// TestNoSpaceThenSpaceReturns fills a capped volume until writes fail
// with its compactions settled (fillUntilFull): the error is ErrNoSpace
// (not a poisoned region), acknowledged writes stay readable, Health says
// no space, and puts that need space keep failing; once the capacity
// grows ProbeSpace clears it and the same region (no reopen) takes writes
// and compacts again; a reopen finds every acknowledged write. Without the
// fix the first compaction that found no room poisoned the region for
// good.
func TestNoSpaceThenSpaceReturns(t *testing.T) {
	for _, mode := range []SyncMode{SyncModeSync, SyncModeAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			o := smallOpts(fs)
			o.SyncMode = mode
			o.MaxSegments = 12
			v := mustOpen(t, o)
			r := mustRegion(t, v, 1)
			acked := map[int][]byte{}
			n, err := fillUntilFull(t, r, 0, acked)
			if !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrVolumeFailed) {
				t.Fatalf("after %d puts: %v, want ErrNoSpace alone", n, err)
			}
			if h := v.Health(); !errors.Is(h, ErrNoSpace) || errors.Is(h, ErrVolumeFailed) {
				t.Fatalf("health on a full volume: %v", h)
			}
			// Still full: later puts that need space (the refused put's
			// size) fail the same way, nothing else. A smaller one may
			// still fit in the log's tail: the engine refuses the writes
			// that need a segment, not every write (a server refuses every
			// write while Health reports no space).
			for i := 0; i < 20; i++ {
				if err := r.Put(key(n+i), fillValue(n+i)); !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrVolumeFailed) {
					t.Fatalf("put %d on a full volume: %v", i, err)
				}
			}
			if err := v.ProbeSpace(); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("probe on a full volume: %v", err)
			}
			checkAcked(t, r, acked, "full")

			setCapacity(v, 0)
			if err := v.ProbeSpace(); err != nil {
				t.Fatalf("probe after space returned: %v", err)
			}
			if h := v.Health(); h != nil {
				t.Fatalf("health after space returned: %v", h)
			}
			for i := n; i < n+1500; i++ {
				val := []byte(fmt.Sprintf("after %d", i))
				if err := r.Put(key(i), val); err != nil {
					t.Fatalf("put %d after space returned: %v", i, err)
				}
				acked[i] = val
			}
			if err := r.Compact(); err != nil {
				t.Fatalf("compaction after space returned: %v", err)
			}
			checkAcked(t, r, acked, "after space returned")
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			v = mustOpen(t, o)
			defer v.Close()
			checkAcked(t, mustRegion(t, v, 1), acked, "reopened")
		})
	}
}

// fullFS makes the file system report ENOSPC when the segment file grows
// (a full file system: fallocate fails) while full is set.
type fullFS struct{ full atomic.Bool }

func (f *fullFS) MaybeError(op errorfs.Op) error {
	if f.full.Load() && op.Kind == errorfs.OpFilePreallocate && strings.HasSuffix(op.Path, dataFileName) {
		return syscall.ENOSPC
	}
	return nil
}

func (f *fullFS) String() string { return "fullFS" }

// TestENOSPCGrowThenSpaceReturns: the file system refuses to grow the
// segment file (ENOSPC from fallocate). Writes fail with ErrNoSpace
// (wrapping ENOSPC), reads go on, the region is not poisoned; once the file
// system has room again writes succeed in the same process, and a crash
// (unsynced bytes lost) keeps every acknowledged sync-mode write.
func TestENOSPCGrowThenSpaceReturns(t *testing.T) {
	mem := vfs.NewCrashableMem()
	inj := &fullFS{}
	o := smallOpts(errorfs.Wrap(mem, inj))
	o.SyncMode = SyncModeSync
	o.GrowStep = 4 * o.SegmentSize // grow often
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	acked := map[int][]byte{}
	for i := 0; i < 300; i++ {
		acked[i] = []byte(fmt.Sprintf("%0300d", i))
		if err := r.Put(key(i), acked[i]); err != nil {
			t.Fatal(err)
		}
	}
	inj.full.Store(true)
	n, err := fillUntilFull(t, r, 300, acked)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrVolumeFailed) {
		t.Fatalf("after %d puts on a full file system: %v", n, err)
	}
	if h := v.Health(); !errors.Is(h, ErrNoSpace) || errors.Is(h, ErrVolumeFailed) {
		t.Fatalf("health: %v", h)
	}
	checkAcked(t, r, acked, "full")
	if err := v.ProbeSpace(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("probe while full: %v", err)
	}
	inj.full.Store(false)
	if err := v.ProbeSpace(); err != nil {
		t.Fatalf("probe after space returned: %v", err)
	}
	for i := n; i < n+1000; i++ {
		acked[i] = []byte(fmt.Sprintf("again %d", i))
		if err := r.Put(key(i), acked[i]); err != nil {
			t.Fatalf("put %d after space returned: %v", i, err)
		}
	}
	checkAcked(t, r, acked, "after space returned")
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	v.Close()
	o.FS = clone
	v2 := mustOpen(t, o)
	defer v2.Close()
	checkAcked(t, mustRegion(t, v2, 1), acked, "after a crash")
}

// TestSpaceReserve: the segment file does not grow into the space kept
// for the metadata store; it does once the file system has room.
func TestSpaceReserve(t *testing.T) {
	mem := vfs.NewMem()
	o := smallOpts(mem)
	o.SpaceReserve = 8 << 20
	o.GrowStep = 4 * o.SegmentSize
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 8<<20 + uint64(v.chunk) - 1, TotalBytes: 1 << 30, UsedBytes: 1 << 29})
	acked := map[int][]byte{}
	n, err := fillUntilFull(t, r, 0, acked)
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("after %d puts: %v, want ErrNoSpace for the reserve", n, err)
	}
	if err := v.ProbeSpace(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("probe: %v", err)
	}
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30})
	if err := v.ProbeSpace(); err != nil {
		t.Fatalf("probe with room: %v", err)
	}
	if err := r.Put(key(n), []byte("x")); err != nil {
		t.Fatalf("put with room: %v", err)
	}
	checkAcked(t, r, acked, "after")
}

// TestEIOFailsVolume: an I/O error writing the log poisons it: Health and
// every later write report ErrVolumeFailed (wrapping the device's error),
// ProbeSpace cannot clear it, reads of what was durable go on, and a
// reopen recovers every acknowledged (sync-mode) write.
func TestEIOFailsVolume(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var eio atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if eio.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, dataFileName) {
			return syscall.EIO
		}
		return nil
	})
	o := smallOpts(errorfs.Wrap(mem, inj))
	o.SyncMode = SyncModeSync
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	acked := map[int][]byte{}
	for i := 0; i < 500; i++ {
		acked[i] = []byte(fmt.Sprintf("v%d", i))
		if err := r.Put(key(i), acked[i]); err != nil {
			t.Fatal(err)
		}
	}
	eio.Store(true)
	err := r.Put(key(1000), []byte("lost"))
	if !errors.Is(err, ErrVolumeFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("put with EIO: %v", err)
	}
	eio.Store(false) // the device answers again: the volume stays failed
	if err := r.Put(key(1001), []byte("x")); !errors.Is(err, ErrVolumeFailed) {
		t.Fatalf("put after EIO: %v", err)
	}
	if h := v.Health(); !errors.Is(h, ErrVolumeFailed) {
		t.Fatalf("health: %v", h)
	}
	if err := v.ProbeSpace(); !errors.Is(err, ErrVolumeFailed) {
		t.Fatalf("probe: %v", err)
	}
	checkAcked(t, r, acked, "failed")
	if _, err := r.Get(key(1000)); err == nil {
		t.Fatal("a write that was refused is readable")
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	v.Close()
	o.FS = clone
	v2 := mustOpen(t, o)
	defer v2.Close()
	r2 := mustRegion(t, v2, 1)
	checkAcked(t, r2, acked, "reopened")
	if err := r2.Put(key(1002), []byte("y")); err != nil {
		t.Fatalf("put after reopen: %v", err)
	}
}

// TestGroupCommitFailsWaiters: sync-mode writers share group commits when
// the segment file's fdatasync starts failing (EIO, or ENOSPC as a thin
// or network file system reports a lost write-back): every put the failed
// sync covered fails (none is acknowledged without being durable), every
// later one fails too, all with ErrVolumeFailed, Health says failed (not
// no-space: a sync failure is not transient), and after a crash every
// acknowledged put is there.
func TestGroupCommitFailsWaiters(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		t.Run(errno.Error(), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			var fail atomic.Bool
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if fail.Load() && op.Kind == errorfs.OpFileSyncData && strings.HasSuffix(op.Path, dataFileName) {
					return errno
				}
				return nil
			})
			o := smallOpts(errorfs.Wrap(mem, inj))
			o.SyncMode = SyncModeSync
			v := mustOpen(t, o)
			r := mustRegion(t, v, 1)
			r.Resume() // the flusher: group commit
			const writers = 8
			acked := make([]map[int][]byte, writers)
			errs := make(chan error, writers)
			start := make(chan struct{})
			for w := range writers {
				acked[w] = map[int][]byte{}
				go func() {
					<-start
					for i := 0; ; i++ {
						k := w*1000000 + i
						val := []byte(fmt.Sprintf("w%d-%d", w, i))
						if err := r.Put(key(k), val); err != nil {
							errs <- err
							return
						}
						acked[w][k] = val
						if i == 200 && w == 0 {
							fail.Store(true)
						}
					}
				}()
			}
			close(start)
			for range writers {
				if err := <-errs; !errors.Is(err, ErrVolumeFailed) || !errors.Is(err, errno) {
					t.Errorf("a writer's error: %v, want ErrVolumeFailed wrapping %v", err, errno)
				}
			}
			if h := v.Health(); !errors.Is(h, ErrVolumeFailed) {
				t.Fatalf("health: %v", h)
			}
			if err := r.Put(key(-1), []byte("x")); !errors.Is(err, ErrVolumeFailed) {
				t.Fatalf("a put after the failed sync: %v", err)
			}
			clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			v.Close()
			o.FS = clone
			v2 := mustOpen(t, o)
			defer v2.Close()
			r2 := mustRegion(t, v2, 1)
			n := 0
			for w := range writers {
				checkAcked(t, r2, acked[w], "after a crash")
				n += len(acked[w])
			}
			t.Logf("%d puts acknowledged before the failure, all durable", n)
		})
	}
}
