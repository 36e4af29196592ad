package engine

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// countingFS counts the bytes read and written through files it opens. The
// engine wraps the metadata store's FS in one so IOMeta is exact.
type countingFS struct {
	vfs.FS
	read, written *atomic.Uint64
}

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
