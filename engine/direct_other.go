//go:build !linux

package engine

// openOSDirect: direct I/O is used on Linux only; elsewhere the volume
// writes everything buffered.
func openOSDirect(string) (DirectFile, error) { return nil, nil }
