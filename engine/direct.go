package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// A replica's data (a Send-Index backup's log and installed index
// segments, a Build-Index backup's log and levels) is read only after a
// promotion, or in a follower's own merges and GC, so the volume writes
// it past the OS page cache when it can (Options.BufferedReplicaWrites
// off, the default): with O_DIRECT, from the image itself, in whole
// dioBlock blocks. The page cache is then left to the data primaries
// serve, and a replica's write costs no copy into it. Reads stay
// buffered, but for a partial first block's read-back; the kernel keeps
// the two views coherent (a direct write writes back and drops the
// cached pages it covers).

// dioBlock is the alignment of direct I/O: of file offsets, lengths and
// memory. 4 KiB covers every Linux file system's logical block size.
const dioBlock = 4096

// DirectFile is the segment file opened for direct I/O: every call's
// offset, length and buffer address are multiples of 4 KiB.
type DirectFile interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
}

// DirectOpener is implemented by a vfs.FS that opens the segment file for
// direct I/O itself: a fault-injecting FS over the OS's (whose direct
// writes must fail as its others do; OpenOSDirect gives it the file) or
// a test's twin. OpenDirect returns nil and no error to have the volume
// write everything buffered; segSize is the volume's segment size.
type DirectOpener interface {
	OpenDirect(path string, segSize int64) (DirectFile, error)
}

// openDirect opens path for direct I/O if fs can: the OS file system
// (OpenOSDirect) or a DirectOpener. nil (and no error) means the volume
// writes everything through fs, with the reason why.
func openDirect(fs vfs.FS, path string, segSize int64) (DirectFile, string, error) {
	if d, ok := fs.(DirectOpener); ok {
		f, err := d.OpenDirect(path, segSize)
		return f, "the file system opened no direct file", err
	}
	if fs != vfs.Default {
		return nil, "the file system wraps the OS's (fault injection) without opening direct files", nil
	}
	f, err := OpenOSDirect(path, segSize)
	return f, fmt.Sprintf("segments of %d bytes or pages of %d (direct I/O needs segments of at least %d and %d-byte pages) or not Linux", segSize, os.Getpagesize(), minDirectSegment, dioBlock), err
}

// OpenOSDirect opens path, a volume's segment file on the OS file system,
// a second time with O_DIRECT (Linux). It returns nil and no error where
// direct writes would not be safe or possible: segments under 2 MiB or
// pages other than 4 KiB (a direct write drops the cached pages it
// covers, and fails to, leaving them stale, if a buffered write dirties
// them meanwhile; the page cache's folios reach 2 MiB there, naturally
// aligned, so one never spans two segments, which are written by one
// writer at a time), or another OS.
func OpenOSDirect(path string, segSize int64) (DirectFile, error) {
	if segSize < minDirectSegment || os.Getpagesize() != dioBlock {
		return nil, nil
	}
	return openOSDirect(path)
}

// minDirectSegment is the smallest segment size written direct on the OS
// file system (OpenOSDirect).
const minDirectSegment = 2 << 20

// bounces are dioBlock-aligned blocks for the partial first and last
// blocks of a direct write.
var bounces = sync.Pool{New: func() any { return alignedBlock() }}

// alignedBlock returns a dioBlock-sized slice whose address is a multiple
// of dioBlock.
func alignedBlock() *[]byte {
	b := alignedBytes(dioBlock)
	return &b
}

// alignedBytes returns n zero bytes starting at a dioBlock-aligned
// address.
func alignedBytes(n int) []byte {
	b := make([]byte, n+dioBlock)
	off := int(dioBlock-uintptr(unsafe.Pointer(&b[0]))%dioBlock) % dioBlock
	return b[off : off+n : off+n]
}

func aligned(b []byte) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%dioBlock == 0
}

// writeSpan writes img[from:to] at file offset base+from, where base is
// the file offset of img[0] and a multiple of dioBlock (a segment's
// start). With direct set and the volume able to, it writes past the page
// cache: the first block's bytes before from are read back from the file
// (or, with headIsFile, taken from img, which the caller vouches holds
// what the file holds there), the last block's bytes after to are zeros,
// and the blocks between come straight from img (which must then start at
// a dioBlock-aligned address; otherwise the span is written buffered).
// Counted under cat as to-from bytes written (the first block's read, if
// any, as read).
func (v *Volume) writeSpan(img []byte, base, from, to int64, cat IOCategory, direct, headIsFile bool) error {
	if from >= to {
		return nil
	}
	if !direct || !v.directOn.Load() || base%dioBlock != 0 || !aligned(img) { // directOn: v.direct is set
		return v.writeAt(img[from:to], base+from, cat)
	}
	err := v.writeSpanDirect(v.direct, img, base, from, to, cat, headIsFile)
	if err != nil && (refused(err) || !v.directOn.Load()) {
		// The file system takes O_DIRECT at open but not these writes
		// (or another writer found so): write buffered from now on. The
		// span is written whole again, over any block that landed.
		if v.directOn.Swap(false) {
			v.log.Warn("direct I/O refused: replicas' writes go through the page cache", zap.Error(err))
		}
		return v.writeAt(img[from:to], base+from, cat)
	}
	if err != nil {
		err = fmt.Errorf("engine: direct write at %d: %w", base+from, ioErr(err))
		v.setNoSpace(err)
		return err
	}
	v.ctr.written[cat].Add(uint64(to - from))
	v.ctr.direct.Add(uint64(to - from))
	return nil
}

func (v *Volume) writeSpanDirect(f DirectFile, img []byte, base, from, to int64, cat IOCategory, headIsFile bool) error {
	pos := from &^ (dioBlock - 1)
	if pos < from {
		// The first block holds bytes before the span: keep them.
		end := min(pos+dioBlock, to)
		err := writeBlock(f, base+pos, end-pos, func(blk []byte) error {
			if headIsFile {
				copy(blk, img[pos:from])
			} else {
				n, err := f.ReadAt(blk, base+pos)
				v.ctr.read[cat].Add(uint64(n))
				if err != nil && !errors.Is(err, io.EOF) {
					return err
				}
				clear(blk[n:])
			}
			copy(blk[from-pos:], img[from:end])
			return nil
		})
		if err != nil {
			return err
		}
		pos += dioBlock
	}
	if whole := to &^ (dioBlock - 1); whole > pos {
		if _, err := f.WriteAt(img[pos:whole], base+pos); err != nil {
			return err
		}
		pos = whole
	}
	if pos < to {
		return writeBlock(f, base+pos, to-pos, func(blk []byte) error {
			copy(blk, img[pos:to])
			return nil
		})
	}
	return nil
}

// writeBlock writes one dioBlock at file offset off from a bounce block
// that fill sets up to n; the bytes after n are zeros.
func writeBlock(f DirectFile, off, n int64, fill func(blk []byte) error) error {
	bp := bounces.Get().(*[]byte)
	defer bounces.Put(bp)
	blk := *bp
	if err := fill(blk); err != nil {
		return err
	}
	clear(blk[n:])
	_, err := f.WriteAt(blk, off)
	return err
}

// refused reports whether a direct read or write failed because the file
// system does not do direct I/O as asked (rather than for want of space
// or a device error).
func refused(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOTSUP)
}
