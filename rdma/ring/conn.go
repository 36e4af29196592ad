package ring

import (
	"encoding/binary"
	"fmt"
	"time"
)

// The connection request's private data: the client's ring sizes.
//
//	magic u32 | version u16 | reserved u16 | request ring u32 | reply ring u32
const (
	connMagic   = 0x47524254 // "TBRG"
	connVersion = 1
	connSize    = 16

	// MinRing and MaxRing bound ring sizes (multiples of HeaderSize).
	MinRing = 4 << 10
	MaxRing = 64 << 20

	// DefaultRing is the default size of each ring, as in the paper.
	DefaultRing = 256 << 10
	// DefaultSpin is how long pollers spin before they park.
	DefaultSpin = 50 * time.Microsecond
)

type connParams struct{ reqRing, repRing uint32 }

func (p connParams) encode() []byte {
	b := make([]byte, connSize)
	binary.LittleEndian.PutUint32(b[0:], connMagic)
	binary.LittleEndian.PutUint16(b[4:], connVersion)
	binary.LittleEndian.PutUint32(b[8:], p.reqRing)
	binary.LittleEndian.PutUint32(b[12:], p.repRing)
	return b
}

func decodeConnParams(b []byte) (connParams, error) {
	if len(b) != connSize || binary.LittleEndian.Uint32(b) != connMagic {
		return connParams{}, fmt.Errorf("%w: not a ring connection request", ErrMalformed)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != connVersion {
		return connParams{}, fmt.Errorf("%w: ring protocol version %d, want %d", ErrMalformed, v, connVersion)
	}
	p := connParams{reqRing: binary.LittleEndian.Uint32(b[8:]), repRing: binary.LittleEndian.Uint32(b[12:])}
	if err := checkRing(int(p.reqRing)); err != nil {
		return p, err
	}
	return p, checkRing(int(p.repRing))
}

func checkRing(n int) error {
	if n < MinRing || n > MaxRing || n%HeaderSize != 0 {
		return fmt.Errorf("%w: ring of %d bytes (want %d..%d, a multiple of %d)", ErrMalformed, n, MinRing, MaxRing, HeaderSize)
	}
	return nil
}
