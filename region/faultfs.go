package region

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"go.uber.org/zap"

	"github.com/tebis-go/tebis/engine"
)

// The fault-fs testing mode (docs/operations.md, "Fault injection"): a
// server started with Config.FaultFS (the hidden flag --fault-fs) reads
// the control file FaultFile in its data directory every faultPoll, and
// fails the volume's file operations as the file says:
//
//	eio           every write and sync (segment file and metadata store) fails with EIO
//	eio-segments  only the segment file's writes and syncs fail with EIO
//	eio-all       reads fail too
//	off, empty, or no file: no fault
//
// An external tool drives it by path: echo eio > DIR/FAULT; rm DIR/FAULT.
// (ENOSPC is produced for real, by a small file system: a tmpfs.)

// FaultFile is the fault-fs control file's name in the data directory.
const FaultFile = "FAULT"

// faultPoll is how often the control file is read.
const faultPoll = 100 * time.Millisecond

// Fault modes.
const (
	faultOff int32 = iota
	faultEIO
	faultEIOSegments
	faultEIOAll
)

var faultModes = map[string]int32{"": faultOff, "off": faultOff, "eio": faultEIO, "eio-segments": faultEIOSegments, "eio-all": faultEIOAll}

// faultInjector is an errorfs.Injector whose mode follows the control
// file.
type faultInjector struct {
	path string
	mode atomic.Int32
	log  *zap.Logger
}

func newFaultInjector(dir string, log *zap.Logger) *faultInjector {
	f := &faultInjector{path: filepath.Join(dir, FaultFile), log: log}
	f.read() // a fault in force at start applies from the volume's open on
	return f
}

// MaybeError implements errorfs.Injector.
func (f *faultInjector) MaybeError(op errorfs.Op) error {
	m := f.mode.Load()
	if m == faultOff {
		return nil
	}
	switch op.Kind.ReadOrWrite() {
	case errorfs.OpIsWrite:
		if m != faultEIOSegments || strings.HasSuffix(op.Path, "segments") {
			return syscall.EIO
		}
	case errorfs.OpIsRead:
		if m == faultEIOAll {
			return syscall.EIO
		}
	}
	return nil
}

func (f *faultInjector) String() string { return "fault-fs " + f.path }

// read sets the mode from the control file.
func (f *faultInjector) read() {
	b, err := os.ReadFile(f.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.log.Warn("reading the fault-fs control file failed", zap.String("path", f.path), zap.Error(err))
		return
	}
	name := strings.TrimSpace(string(b))
	m, ok := faultModes[name]
	if !ok {
		f.log.Warn("unknown fault-fs mode ignored", zap.String("path", f.path), zap.String("mode", name))
		return
	}
	if old := f.mode.Swap(m); old != m {
		f.log.Warn("fault-fs mode changed", zap.String("mode", name))
	}
}

// poll follows the control file until ctx ends.
func (f *faultInjector) poll(ctx context.Context) {
	t := time.NewTicker(faultPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.read()
		}
	}
}

// faultFS is the fault-fs mode's file system: the OS's through errorfs,
// whose direct files (engine.DirectOpener: replicas' writes past the page
// cache) fail as its other files do.
type faultFS struct {
	vfs.FS // errorfs over base
	base   vfs.FS
	inj    *faultInjector
}

func newFaultFS(base vfs.FS, inj *faultInjector) *faultFS {
	return &faultFS{FS: errorfs.Wrap(base, inj), base: base, inj: inj}
}

// OpenDirect implements engine.DirectOpener: a direct file over the OS's
// file system only.
func (f *faultFS) OpenDirect(path string, segSize int64) (engine.DirectFile, error) {
	if f.base != vfs.Default {
		return nil, nil
	}
	d, err := engine.OpenOSDirect(path, segSize)
	if d == nil || err != nil {
		return nil, err
	}
	return &faultDirect{DirectFile: d, inj: f.inj, path: path}, nil
}

// faultDirect is a direct file whose reads and writes ask the injector
// first.
type faultDirect struct {
	engine.DirectFile
	inj  *faultInjector
	path string
}

func (f *faultDirect) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(errorfs.Op{Kind: errorfs.OpFileReadAt, Path: f.path, Offset: off}); err != nil {
		return 0, err
	}
	return f.DirectFile.ReadAt(p, off)
}

func (f *faultDirect) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(errorfs.Op{Kind: errorfs.OpFileWriteAt, Path: f.path, Offset: off}); err != nil {
		return 0, err
	}
	return f.DirectFile.WriteAt(p, off)
}
