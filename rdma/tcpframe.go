package rdma

import (
	"encoding/binary"
	"fmt"
)

// TCP transport frames: a fixed 32-byte little-endian header, then Len
// data bytes for a WRITE.
//
//	type u8 | flags u8 | code u16 | len u32 | addr u64 | key u32 | imm u32 | off u64
//
// WRITE: data into the receiver's region (addr, key) at off.
// ACK: off = number of WRITEs applied so far (cumulative).
// NAK: off = index of a WRITE that was refused; code says why.
// PING: keeps an idle connection alive.
// CLOSE: the sender closes the connection (its last frame): the receiver's
// QP breaks with ErrPeerGone; a connection that ends without one breaks
// with ErrPeerLost.
const (
	frameHeader = 32

	frameWrite = 1
	frameAck   = 2
	frameNak   = 3
	framePing  = 4
	frameClose = 5

	flagSolicited = 1

	nakAccess = 1

	// maxFrameData bounds one WRITE's length on the wire.
	maxFrameData = MaxMRSize
)

type frame struct {
	typ   uint8
	flags uint8
	code  uint16
	n     uint32
	addr  uint64
	key   uint32
	imm   uint32
	off   uint64
}

func (f *frame) put(b []byte) {
	b[0], b[1] = f.typ, f.flags
	binary.LittleEndian.PutUint16(b[2:], f.code)
	binary.LittleEndian.PutUint32(b[4:], f.n)
	binary.LittleEndian.PutUint64(b[8:], f.addr)
	binary.LittleEndian.PutUint32(b[16:], f.key)
	binary.LittleEndian.PutUint32(b[20:], f.imm)
	binary.LittleEndian.PutUint64(b[24:], f.off)
}

// decodeFrame parses a header; unknown types and data on control frames
// are protocol violations.
func decodeFrame(b []byte) (frame, error) {
	f := frame{
		typ: b[0], flags: b[1],
		code: binary.LittleEndian.Uint16(b[2:]),
		n:    binary.LittleEndian.Uint32(b[4:]),
		addr: binary.LittleEndian.Uint64(b[8:]),
		key:  binary.LittleEndian.Uint32(b[16:]),
		imm:  binary.LittleEndian.Uint32(b[20:]),
		off:  binary.LittleEndian.Uint64(b[24:]),
	}
	switch f.typ {
	case frameWrite:
		if f.n > maxFrameData {
			return f, fmt.Errorf("%w: WRITE frame of %d bytes", ErrProtocol, f.n)
		}
	case frameAck, frameNak, framePing, frameClose:
		if f.n != 0 {
			return f, fmt.Errorf("%w: control frame %d with %d data bytes", ErrProtocol, f.typ, f.n)
		}
	default:
		return f, fmt.Errorf("%w: frame type %d", ErrProtocol, f.typ)
	}
	return f, nil
}
