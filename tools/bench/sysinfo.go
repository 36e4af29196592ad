package bench

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// dirSize is the sum of the sizes of the files under dir.
func dirSize(fs vfs.FS, dir string) (int64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", dir, err)
	}
	var total int64
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		fi, err := fs.Stat(p)
		if err != nil {
			continue // removed since List: a compaction deleted it
		}
		if fi.IsDir() {
			s, err := dirSize(fs, p)
			if err != nil {
				return 0, err
			}
			total += s
			continue
		}
		total += fi.Size()
	}
	return total, nil
}

// SeqWriteBandwidth writes total bytes in chunk-sized writes to a new file
// in dir, fdatasyncs it, removes it, and returns the rate in bytes/s
// including the final sync.
func SeqWriteBandwidth(fs vfs.FS, dir string, total, chunk int64) (float64, error) {
	return seqWrite(fs, dir, total, chunk, false)
}

// SyncedSeqWriteBandwidth is SeqWriteBandwidth with an fdatasync after
// every chunk: the pattern of a log that makes each chunk durable before
// the next one is written (the tebis log in async mode, a segment at a
// time).
func SyncedSeqWriteBandwidth(fs vfs.FS, dir string, total, chunk int64) (float64, error) {
	return seqWrite(fs, dir, total, chunk, true)
}

func seqWrite(fs vfs.FS, dir string, total, chunk int64, syncEach bool) (float64, error) {
	if total <= 0 || chunk <= 0 {
		return 0, fmt.Errorf("%w: sequential write of %d bytes in %d-byte chunks", ErrBadConfig, total, chunk)
	}
	buf := make([]byte, chunk)
	_, _ = rand.Read(buf) // never fails; random so no layer can compress it
	name := fs.PathJoin(dir, "seqwrite.tmp")
	start := time.Now()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, fmt.Errorf("sequential write test: %w", err)
	}
	defer func() { _ = fs.Remove(name) }()
	var written int64
	for written < total {
		n, err := f.Write(buf[:min(chunk, total-written)])
		written += int64(n)
		if err != nil {
			_ = f.Close()
			return 0, fmt.Errorf("sequential write test: %w", err)
		}
		if syncEach && written < total {
			if err := f.SyncData(); err != nil {
				_ = f.Close()
				return 0, fmt.Errorf("sequential write test: fdatasync: %w", err)
			}
		}
	}
	if err := f.SyncData(); err != nil {
		_ = f.Close()
		return 0, fmt.Errorf("sequential write test: fdatasync: %w", err)
	}
	elapsed := time.Since(start)
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("sequential write test: %w", err)
	}
	return float64(written) / elapsed.Seconds(), nil
}
