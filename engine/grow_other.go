//go:build !linux

package engine

import "github.com/cockroachdb/pebble/v2/vfs"

// growFile asks the file system to reserve [off, off+n) of f.
func growFile(f vfs.File, off, n int64) error { return f.Preallocate(off, n) }
