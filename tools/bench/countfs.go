package bench

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
)

// CountingFS wraps a vfs.FS and counts the bytes read and written through
// its files; both engines run on one, so their device bytes compare exactly.
// It is safe for concurrent use.
type CountingFS struct{ *engine.CountingFS }

var _ vfs.FS = (*CountingFS)(nil)

// NewCountingFS wraps fs.
func NewCountingFS(fs vfs.FS) *CountingFS { return &CountingFS{engine.NewCountingFS(fs)} }

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
	return IOBytes{Read: fs.BytesRead(), Written: fs.BytesWritten()}
}
