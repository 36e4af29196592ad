package ring

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the size of a message header and the unit messages are
// padded to.
const HeaderSize = 64

// Header layout (little-endian):
//
//	0  type u16      2  flags u16     4  payload length u32
//	8  request id u64
//	16 reply offset u32              20 reply size u32
//	24 region id u64
//	32 epoch u64
//	40 status u16    42 reserved u16 44 aux u32 (TooSmall: size needed)
//	48 crc32c of bytes 0..47 u32     52 reserved u32
//	56 magic u64 (the rendezvous word, written last in a header-only message)
//
// A message with a payload is HeaderSize + pad64(payload + 8) bytes; its
// last 8 bytes are the tail word, tailMagic ^ request id, written last.
const (
	magic     = 0x53494245_54524e47 // "GNRTEBIS" little-endian
	tailMagic = 0x4c494154_53494254 // "TBISTAIL"
)

// Message types the ring itself knows; applications use the rest.
const (
	// TypeNoop fills the rest of the request ring when the next message
	// does not fit before its end; it has no tail and gets no reply.
	TypeNoop uint16 = 1
	// TypeFirstApp is the first type an application may use.
	TypeFirstApp uint16 = 16
)

// Flags.
const (
	FlagReply uint16 = 1 << 0
)

// Status codes the ring itself sends; applications use the rest.
const (
	StatusOK uint16 = 0
	// StatusTooSmall: the reply slot was too small; Aux is the size needed.
	StatusTooSmall uint16 = 1
	// StatusUnknownType: no handler for the request type.
	StatusUnknownType uint16 = 2
	// StatusFirstApp is the first status an application may use.
	StatusFirstApp uint16 = 16
)

// Header is a decoded message header.
type Header struct {
	Type      uint16
	Flags     uint16
	Len       uint32 // payload bytes, unpadded
	ReqID     uint64
	ReplyOff  uint32
	ReplySize uint32
	Region    uint64
	Epoch     uint64
	Status    uint16
	Aux       uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errChecksum: the header's checksum does not match. Right after its magic
// became visible this may only mean its other bytes are still arriving.
var errChecksum = fmt.Errorf("%w: header checksum", ErrMalformed)

// MaxPayload is the largest payload a message can carry in a ring of n
// bytes (a message takes at most half a ring): MsgSize(MaxPayload(n)) <=
// n/2.
func MaxPayload(n int) int {
	return max(n/2/HeaderSize*HeaderSize-HeaderSize-8, 0)
}

// MsgSize is the ring bytes a message with n payload bytes occupies.
func MsgSize(n int) int {
	if n == 0 {
		return HeaderSize
	}
	return HeaderSize + (n+8+HeaderSize-1)/HeaderSize*HeaderSize
}

// put encodes h into b[:HeaderSize], magic included.
func (h *Header) put(b []byte) {
	binary.LittleEndian.PutUint16(b[0:], h.Type)
	binary.LittleEndian.PutUint16(b[2:], h.Flags)
	binary.LittleEndian.PutUint32(b[4:], h.Len)
	binary.LittleEndian.PutUint64(b[8:], h.ReqID)
	binary.LittleEndian.PutUint32(b[16:], h.ReplyOff)
	binary.LittleEndian.PutUint32(b[20:], h.ReplySize)
	binary.LittleEndian.PutUint64(b[24:], h.Region)
	binary.LittleEndian.PutUint64(b[32:], h.Epoch)
	binary.LittleEndian.PutUint16(b[40:], h.Status)
	binary.LittleEndian.PutUint16(b[42:], 0)
	binary.LittleEndian.PutUint32(b[44:], h.Aux)
	binary.LittleEndian.PutUint32(b[48:], crc32.Checksum(b[:48], castagnoli))
	binary.LittleEndian.PutUint32(b[52:], 0)
	binary.LittleEndian.PutUint64(b[56:], magic)
}

// encode writes a whole message (header, payload then tail, padding,
// tail marker) into b, which must hold MsgSize(len(payload)+len(tail))
// bytes. h.Len is set.
func encode(b []byte, h Header, payload, tail []byte) int {
	size := len(payload) + len(tail)
	h.Len = uint32(size)
	n := MsgSize(size)
	h.put(b)
	if size > 0 {
		at := HeaderSize + copy(b[HeaderSize:], payload)
		at += copy(b[at:], tail)
		clear(b[at : n-8])
		binary.LittleEndian.PutUint64(b[n-8:], tailMagic^h.ReqID)
	}
	return n
}

// decodeHeader parses b[:HeaderSize]. It checks the magic and checksum
// and that the message fits in limit bytes.
func decodeHeader(b []byte, limit int) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header of %d bytes", ErrMalformed, len(b))
	}
	if m := binary.LittleEndian.Uint64(b[56:]); m != magic {
		return Header{}, fmt.Errorf("%w: bad magic %#x", ErrMalformed, m)
	}
	if c := binary.LittleEndian.Uint32(b[48:]); c != crc32.Checksum(b[:48], castagnoli) {
		return Header{}, errChecksum
	}
	h := Header{
		Type:      binary.LittleEndian.Uint16(b[0:]),
		Flags:     binary.LittleEndian.Uint16(b[2:]),
		Len:       binary.LittleEndian.Uint32(b[4:]),
		ReqID:     binary.LittleEndian.Uint64(b[8:]),
		ReplyOff:  binary.LittleEndian.Uint32(b[16:]),
		ReplySize: binary.LittleEndian.Uint32(b[20:]),
		Region:    binary.LittleEndian.Uint64(b[24:]),
		Epoch:     binary.LittleEndian.Uint64(b[32:]),
		Status:    binary.LittleEndian.Uint16(b[40:]),
		Aux:       binary.LittleEndian.Uint32(b[44:]),
	}
	if h.Type == TypeNoop {
		if int64(h.Len)+HeaderSize > int64(limit) || (int(h.Len)+HeaderSize)%HeaderSize != 0 {
			return Header{}, fmt.Errorf("%w: noop of %d bytes with %d left in the ring", ErrMalformed, h.Len, limit)
		}
		return h, nil
	}
	if int64(h.Len) > int64(limit) || MsgSize(int(h.Len)) > limit {
		return Header{}, fmt.Errorf("%w: payload of %d bytes with %d left in the ring", ErrMalformed, h.Len, limit)
	}
	return h, nil
}

// tailOK reports whether the message at b (MsgSize(h.Len) bytes) has its
// tail word: with the transport's last-word-last guarantee, the whole
// message has then arrived.
func tailOK(word uint64, h Header) bool { return h.Len == 0 || word == tailMagic^h.ReqID }
