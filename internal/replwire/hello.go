package replwire

import (
	"encoding/binary"
	"fmt"
)

// Hello is the private data of a primary's connection request to a
// backup for one region's log mirror: the backup answers by exposing the
// region's two-segment buffer.
//
//	0 u32 magic "TBRP"  4 u32 version (1)  8 u64 region  16 u64 epoch  24 u64 segment size
type Hello struct {
	Region  uint64
	Epoch   uint64
	SegSize int64
}

const (
	helloMagic   = 0x50524254 // "TBRP"
	helloVersion = 1
	helloSize    = 32
)

// Encode returns the hello's bytes.
func (h Hello) Encode() []byte {
	b := make([]byte, helloSize)
	binary.LittleEndian.PutUint32(b, helloMagic)
	binary.LittleEndian.PutUint32(b[4:], helloVersion)
	binary.LittleEndian.PutUint64(b[8:], h.Region)
	binary.LittleEndian.PutUint64(b[16:], h.Epoch)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.SegSize))
	return b
}

// DecodeHello parses a hello.
func DecodeHello(b []byte) (Hello, error) {
	if len(b) != helloSize || binary.LittleEndian.Uint32(b) != helloMagic {
		return Hello{}, fmt.Errorf("%w: not a replication hello", ErrMalformed)
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != helloVersion {
		return Hello{}, fmt.Errorf("%w: replication hello version %d, want %d", ErrMalformed, v, helloVersion)
	}
	return Hello{Region: binary.LittleEndian.Uint64(b[8:]), Epoch: binary.LittleEndian.Uint64(b[16:]), SegSize: int64(binary.LittleEndian.Uint64(b[24:]))}, nil
}
