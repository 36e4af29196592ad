//go:build linux

package engine

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// growFile allocates [off, off+n) of f and extends its size, so later
// writes there and their fdatasync need no file-size metadata update.
func growFile(f vfs.File, off, n int64) error {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		return unix.Fallocate(int(fd), 0, off, n)
	}
	return f.Preallocate(off, n)
}
