package bench

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// CountingFS wraps a vfs.FS and counts the bytes read and written through
// its files (Read, ReadAt, Write, WriteAt). It is safe for concurrent use.
type CountingFS struct {
	vfs.FS
	read, written atomic.Uint64
}

var _ vfs.FS = (*CountingFS)(nil)

// NewCountingFS wraps fs.
func NewCountingFS(fs vfs.FS) *CountingFS { return &CountingFS{FS: fs} }

// IOBytes is a snapshot of a CountingFS.
type IOBytes struct {
	Read    uint64 `json:"read"`
	Written uint64 `json:"written"`
}

// Total is Read + Written.
func (b IOBytes) Total() uint64 { return b.Read + b.Written }

// Sub returns b - o.
func (b IOBytes) Sub(o IOBytes) IOBytes {
	return IOBytes{Read: b.Read - o.Read, Written: b.Written - o.Written}
}

// Bytes returns the counters so far.
func (fs *CountingFS) Bytes() IOBytes {
	return IOBytes{Read: fs.read.Load(), Written: fs.written.Load()}
}

func (fs *CountingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, fs: fs}, nil
}

// Create implements vfs.FS.
func (fs *CountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

// Open implements vfs.FS.
func (fs *CountingFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

// OpenReadWrite implements vfs.FS.
func (fs *CountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

// ReuseForWrite implements vfs.FS.
func (fs *CountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

// Unwrap implements vfs.FS.
func (fs *CountingFS) Unwrap() vfs.FS { return fs.FS }

type countingFile struct {
	vfs.File
	fs *CountingFS
}

func (f *countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.fs.read.Add(uint64(n))
	return n, err
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.fs.read.Add(uint64(n))
	return n, err
}

func (f *countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.fs.written.Add(uint64(n))
	return n, err
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.fs.written.Add(uint64(n))
	return n, err
}
