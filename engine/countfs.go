package engine

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// CountingFS wraps a vfs.FS and counts the bytes read and written through
// the files it opens (Read, ReadAt, Write, WriteAt). It is safe for
// concurrent use. The engine wraps its metadata store's FS in one so IOMeta
// is exact; benchmarks wrap whole engines in one to compare them.
type CountingFS = countingFS

type countingFS struct {
	vfs.FS
	read, written *atomic.Uint64
}

// NewCountingFS wraps fs with counters of its own.
func NewCountingFS(fs vfs.FS) *CountingFS {
	return &countingFS{FS: fs, read: new(atomic.Uint64), written: new(atomic.Uint64)}
}

// BytesRead is the number of bytes read so far.
func (fs countingFS) BytesRead() uint64 { return fs.read.Load() }

// BytesWritten is the number of bytes written so far.
func (fs countingFS) BytesWritten() uint64 { return fs.written.Load() }

func (fs countingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, fs: fs}, nil
}

func (fs countingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs countingFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

func (fs countingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs countingFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(old, name, c))
}

func (fs countingFS) Unwrap() vfs.FS { return fs.FS }

type countingFile struct {
	vfs.File
	fs countingFS
}

func (f countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.fs.read.Add(uint64(n))
	return n, err
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.fs.read.Add(uint64(n))
	return n, err
}

func (f countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.fs.written.Add(uint64(n))
	return n, err
}

func (f countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.fs.written.Add(uint64(n))
	return n, err
}
