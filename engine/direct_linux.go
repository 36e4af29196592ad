//go:build linux

package engine

import (
	"os"

	"golang.org/x/sys/unix"
)

// openOSDirect opens path (the segment file, open buffered too) a second
// time with O_DIRECT.
func openOSDirect(path string) (DirectFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}
