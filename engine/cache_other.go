//go:build !linux

package engine

import "github.com/cockroachdb/pebble/v2/vfs"

// dropCache is a no-op where the kernel has no fadvise.
func dropCache(vfs.File, int64, int64, bool) {}

// noReadahead is a no-op where the kernel has no fadvise.
func noReadahead(vfs.File) {}
