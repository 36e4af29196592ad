package engine

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type gateListener struct {
	NopListener
	gate chan struct{}
}

func (g *gateListener) CompactionStarted(CompactionInfo) { <-g.gate }

// TestQuiesceHoldsStalledWriter: a writer stalled on a full L0 (the
// previous one compacting) when Quiesce starts must not append while the
// region is quiesced; it goes on after the release.
func TestQuiesceHoldsStalledWriter(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 8
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	gl := &gateListener{gate: make(chan struct{})}
	r.SetListener(gl)
	for i := range 17 { // the 9th freezes L0 (compaction blocks), 17th would stall
		if i == 16 {
			break
		}
		if err := r.Put(key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	var wrote atomic.Bool
	go func() {
		if err := r.Put(key(100), []byte("stalled")); err != nil {
			t.Error(err)
		}
		wrote.Store(true)
	}()
	time.Sleep(100 * time.Millisecond)
	if wrote.Load() {
		t.Fatal("writer did not stall")
	}
	type qres struct {
		release func()
		err     error
	}
	qc := make(chan qres, 1)
	go func() { rel, err := r.Quiesce(); qc <- qres{rel, err} }()
	time.Sleep(100 * time.Millisecond)
	close(gl.gate)
	q := <-qc
	if q.err != nil {
		t.Fatal(q.err)
	}
	pos := r.log.pos()
	time.Sleep(100 * time.Millisecond)
	t.Logf("writer done while quiesced: %v; log moved while quiesced: %v", wrote.Load(), r.log.pos() != pos)
	if wrote.Load() {
		t.Errorf("a client write completed while the region was quiesced")
	}
	q.release()
	for deadline := time.Now().Add(10 * time.Second); !wrote.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled writer did not go on after the release")
		}
	}
}

type slowSyncFS struct {
	vfs.FS
	block atomic.Bool
	in    chan struct{}
	gate  chan struct{}
}

type slowFile struct {
	vfs.File
	fs *slowSyncFS
}

func (f slowFile) SyncData() error {
	if f.fs.block.CompareAndSwap(true, false) {
		f.fs.in <- struct{}{}
		<-f.fs.gate
	}
	return f.File.SyncData()
}

func (fs *slowSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return slowFile{f, fs}, nil
}

func (fs *slowSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return slowFile{f, fs}, nil
}

type failRepl struct{}

func (failRepl) WaitReplicated(uint64) error { return errFenced }

var errFenced = ErrClosed

// A sync-mode write appended while a replicator was attached, whose
// replicator is detached (Shipper.Close: fence / stopDeposed) during its
// fsync, returns success without waiting for any backup.
func TestWriteWaitsForItsReplicator(t *testing.T) {
	fs := &slowSyncFS{FS: vfs.NewMem(), in: make(chan struct{}), gate: make(chan struct{})}
	o := smallOpts(fs)
	o.SyncMode = SyncModeSync
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	r.SetReplicator(failRepl{})
	if err := r.Put(key(1), []byte("x")); err == nil {
		t.Fatal("the failing replicator should refuse")
	}
	fs.block.Store(true)
	done := make(chan error, 1)
	go func() { done <- r.Put(key(2), []byte("acked?")) }()
	<-fs.in              // the writer appended under the replicator and is in its fsync
	r.SetReplicator(nil) // the shipper closes (fence)
	close(fs.gate)
	if err := <-done; err == nil {
		t.Errorf("write acknowledged although its replicator never confirmed it")
	}
}
