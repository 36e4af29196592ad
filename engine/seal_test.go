package engine

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// sealHook intercepts the sealer's write: in async mode, with no Sync
// before it, a left tail's first write to the device is the one at its
// segment's offset segHeaderSize (a preparation writes only the header).
// Armed, it holds the first such write until released (or fails it), and
// records every later write of the segments file.
type sealHook struct {
	segSize int64
	armed   atomic.Bool
	fail    atomic.Bool
	in      chan int64 // the held write's offset
	gate    chan struct{}
	mu      sync.Mutex
	writes  []int64 // offsets of segments-file writes while armed or held
	holding atomic.Bool
}

func newSealHook(segSize int64) *sealHook {
	return &sealHook{segSize: segSize, in: make(chan int64, 1), gate: make(chan struct{})}
}

func (h *sealHook) inject(op errorfs.Op) error {
	if op.Kind != errorfs.OpFileWriteAt || !strings.HasSuffix(op.Path, dataFileName) {
		return nil
	}
	if h.holding.Load() {
		h.mu.Lock()
		h.writes = append(h.writes, op.Offset)
		h.mu.Unlock()
	}
	if op.Offset%h.segSize == segHeaderSize && h.armed.CompareAndSwap(true, false) {
		h.holding.Store(true)
		h.in <- op.Offset
		if h.fail.Load() {
			return syscall.EIO
		}
		<-h.gate
	}
	return nil
}

// within runs f and fails the test if it does not return within d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func sealValue(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 500) }

// TestSealRunsBehindAppends: without a listener, a full tail is written
// and fdatasynced by a sealer while appends go on in the next segment.
// Held in its write, the seal does not hold up puts; reads of its records
// are served from its image; a Sync waits for it and nothing of the new
// tail reaches the device before it; a crash meanwhile recovers a prefix of
// the log holding at least everything before the held segment; once it
// completes, every record is there after a reopen.
func TestSealRunsBehindAppends(t *testing.T) {
	mem := vfs.NewCrashableMem()
	o := smallOpts(nil)
	h := newSealHook(o.SegmentSize)
	o.FS = errorfs.Wrap(mem, errorfs.InjectorFunc(h.inject))
	o.L0Pairs = 100000 // no compaction: its sync would wait for the seal too
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	r.Resume()

	// Fill the first segment; once its seal is done, arm the hook for the
	// second.
	n, firstEnd := 0, -1
	for ; firstEnd < 0; n++ {
		if err := r.Put(key(n), sealValue(n)); err != nil {
			t.Fatal(err)
		}
		if v.Stats().LogSeals == 1 {
			firstEnd = n // key n is the first record of segment 2
		}
	}
	r.log.waitSealed()
	h.armed.Store(true)
	for v.Stats().LogSeals < 2 {
		if err := r.Put(key(n), sealValue(n)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	var heldAt int64
	select {
	case heldAt = <-h.in:
	case <-time.After(5 * time.Second):
		t.Fatal("the second seal did not reach the device")
	}
	heldSeg := uint64(heldAt / o.SegmentSize)
	r.log.mu.Lock()
	tailSeg := r.log.tail.seg
	r.log.mu.Unlock()
	if tailSeg == heldSeg {
		t.Fatalf("the held seal's segment %d is still the tail", heldSeg)
	}

	// Appends continue in the new tail while the seal is held.
	within(t, 5*time.Second, "puts during a held seal", func() {
		for i := 0; i < 20; i, n = i+1, n+1 {
			if err := r.Put(key(n), sealValue(n)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	// Records of the held segment (and of the one before) read back.
	for _, i := range []int{0, firstEnd - 1, firstEnd, n - 25, n - 1} {
		got, err := r.Get(key(i))
		if err != nil || !bytes.Equal(got, sealValue(i)) {
			t.Fatalf("get key %d during a held seal: %v (value matches: %v)", i, err, bytes.Equal(got, sealValue(i)))
		}
	}
	// A Sync waits for the seal.
	synced := make(chan error, 1)
	go func() { synced <- r.Sync() }()
	select {
	case err := <-synced:
		t.Fatalf("Sync returned (%v) while the seal was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	h.mu.Lock()
	for _, off := range h.writes {
		if uint64(off/o.SegmentSize) == tailSeg {
			t.Errorf("write at %d (the new tail, segment %d) while the seal of segment %d was held", off, tailSeg, heldSeg)
		}
	}
	h.mu.Unlock()

	// A crash now recovers a prefix holding all of segment 1.
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	checkPrefix(t, clone, n, firstEnd)

	close(h.gate)
	select {
	case err := <-synced:
		if err != nil {
			t.Fatalf("Sync after the seal: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Sync did not return after the seal was released")
	}
	for _, s := range r.LogSegments() {
		if s.Segment == heldSeg && s.End == 0 {
			t.Errorf("segment %d listed unsealed after its seal", heldSeg)
		}
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	checkPrefix(t, mem, n, n)
}

// checkPrefix opens the volume in fs and checks that the keys it holds
// are keys 0..k-1 for some k >= atLeast, each with its value.
func checkPrefix(t *testing.T, fs vfs.FS, written, atLeast int) {
	t.Helper()
	o := smallOpts(fs)
	o.L0Pairs = 100000
	v := mustOpen(t, o)
	defer func() {
		if err := v.Close(); err != nil {
			t.Error(err)
		}
	}()
	r := mustRegion(t, v, 1)
	k := -1
	for i := 0; i < written; i++ {
		got, err := r.Get(key(i))
		switch {
		case errors.Is(err, ErrNotFound):
			if k < 0 {
				k = i
			}
		case err != nil:
			t.Fatalf("recovered key %d: %v", i, err)
		case k >= 0:
			t.Fatalf("recovered log is not a prefix: key %d missing, key %d present", k, i)
		case !bytes.Equal(got, sealValue(i)):
			t.Fatalf("recovered key %d: wrong value", i)
		}
	}
	if k < 0 {
		k = written
	}
	if k < atLeast {
		t.Fatalf("recovered keys 0..%d, want at least 0..%d", k-1, atLeast-1)
	}
}

// TestSealFailurePoisonsLog: a sealer's failed write poisons the log: Sync
// and later puts fail with ErrVolumeFailed; the records of the segment it
// failed to write still read from its image.
func TestSealFailurePoisonsLog(t *testing.T) {
	o := smallOpts(nil)
	h := newSealHook(o.SegmentSize)
	h.fail.Store(true)
	o.FS = errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(h.inject))
	o.L0Pairs = 100000
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	r.Resume()
	h.armed.Store(true)
	n := 0
	for ; v.Stats().LogSeals < 1; n++ {
		if err := r.Put(key(n), sealValue(n)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-h.in:
	case <-time.After(5 * time.Second):
		t.Fatal("the seal did not reach the device")
	}
	if err := r.Sync(); !errors.Is(err, ErrVolumeFailed) {
		t.Fatalf("Sync after a failed seal: %v, want ErrVolumeFailed", err)
	}
	var err error
	for i := 0; err == nil && i < 100; i++ {
		err = r.Put(key(n+i), sealValue(n+i))
	}
	if !errors.Is(err, ErrVolumeFailed) {
		t.Fatalf("put after a failed seal: %v, want ErrVolumeFailed", err)
	}
	for _, i := range []int{n - 2, 0} {
		if got, err := r.Get(key(i)); err != nil || !bytes.Equal(got, sealValue(i)) {
			t.Errorf("get key %d after a failed seal: %v", i, err)
		}
	}
	_ = v.Close()
}

// blockedSealListener blocks in LogSealed until released, as a Shipper
// waits there for a buffer half (or for its Close).
type blockedSealListener struct {
	NopListener
	in      chan struct{} // receives when LogSealed starts waiting
	release chan struct{}
}

func (b *blockedSealListener) LogSealed(LogSeal) {
	b.in <- struct{}{}
	<-b.release
}

// TestSetListenerNilDoesNotWaitForListenedSwitch: removing a listener
// does not wait for a switch blocked in that listener's LogSealed (the
// switch holds the log's sync lock; a Shipper's Close removes itself, then
// releases LogSealed: waiting there would stall the detach until the
// stream's timeouts).
func TestSetListenerNilDoesNotWaitForListenedSwitch(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 100000
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	r.Resume()
	b := &blockedSealListener{in: make(chan struct{}, 1), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(b.release) }) }
	defer release() // before v.Close, should the test fail
	r.SetListener(b)
	done := make(chan error, 1)
	go func() {
		for n := 0; ; n++ {
			if err := r.Put(key(n), sealValue(n)); err != nil || v.Stats().LogSeals > 0 {
				done <- err
				return
			}
		}
	}()
	select {
	case <-b.in:
	case <-time.After(10 * time.Second):
		t.Fatal("no switch reached the listener")
	}
	removed := make(chan struct{})
	go func() { r.SetListener(nil); close(removed) }()
	select {
	case <-removed:
	case <-time.After(2 * time.Second):
		release()
		<-removed
		t.Fatal("SetListener(nil) waited for a switch blocked in the listener's LogSealed")
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
