//go:build linux

package engine

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

var pageSize = unix.Getpagesize()

// dropCache asks the kernel to drop [off, off+n) of f from the page cache
// (written first when written: dirty pages are not dropped). Best effort:
// a file without a descriptor (an in-memory FS) is left as it is.
func dropCache(f vfs.File, off, n int64, written bool) {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return
	}
	if written {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	}
	// Whole pages: the kernel keeps a page the range covers in part (a
	// segment's last node rarely ends on a page boundary).
	page := int64(pageSize)
	start, end := off/page*page, (off+n+page-1)/page*page
	_ = unix.Fadvise(int(fd), start, end-start, unix.FADV_DONTNEED)
}

// noReadahead turns the kernel's readahead off for f (best effort).
func noReadahead(f vfs.File) {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		_ = unix.Fadvise(int(fd), 0, 0, unix.FADV_RANDOM)
	}
}
