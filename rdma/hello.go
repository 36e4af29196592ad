package rdma

import (
	"encoding/binary"
	"fmt"
)

// The connection set-up message both socket transports exchange: a
// request (dialer), then an accept or reject (listener).
//
//	magic u32 | version u16 | kind u8 | nMR u8 | privLen u32 |
//	nMR x (addr u64, key u32, len u64) | private
const (
	helloMagic   = 0x54425244 // "TBRD"
	helloVersion = 1
	helloFixed   = 12
	helloMRSize  = 20
)

type helloKind uint8

const (
	helloRequest helloKind = iota + 1
	helloAccept
	helloReject
)

type hello struct {
	kind    helloKind
	mrs     []RemoteMR
	private []byte
}

func (h hello) size() int { return helloFixed + len(h.mrs)*helloMRSize + len(h.private) }

func (h hello) encode() []byte {
	b := make([]byte, h.size())
	binary.LittleEndian.PutUint32(b[0:], helloMagic)
	binary.LittleEndian.PutUint16(b[4:], helloVersion)
	b[6] = byte(h.kind)
	b[7] = byte(len(h.mrs))
	binary.LittleEndian.PutUint32(b[8:], uint32(len(h.private)))
	o := helloFixed
	for _, m := range h.mrs {
		binary.LittleEndian.PutUint64(b[o:], m.Addr)
		binary.LittleEndian.PutUint32(b[o+8:], m.Key)
		binary.LittleEndian.PutUint64(b[o+12:], m.Len)
		o += helloMRSize
	}
	copy(b[o:], h.private)
	return b
}

// helloHeader validates the fixed part and returns the whole message's size.
func helloHeader(b []byte) (int, error) {
	if len(b) < helloFixed {
		return 0, fmt.Errorf("%w: set-up message of %d bytes", ErrProtocol, len(b))
	}
	if m := binary.LittleEndian.Uint32(b); m != helloMagic {
		return 0, fmt.Errorf("%w: set-up magic %#x", ErrProtocol, m)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != helloVersion {
		return 0, fmt.Errorf("%w: set-up version %d, want %d", ErrProtocol, v, helloVersion)
	}
	if k := helloKind(b[6]); k < helloRequest || k > helloReject {
		return 0, fmt.Errorf("%w: set-up kind %d", ErrProtocol, k)
	}
	n, priv := int(b[7]), binary.LittleEndian.Uint32(b[8:])
	if n > MaxExposed || priv > MaxPrivate {
		return 0, fmt.Errorf("%w: set-up message with %d regions and %d private bytes", ErrProtocol, n, priv)
	}
	return helloFixed + n*helloMRSize + int(priv), nil
}

func decodeHello(b []byte) (hello, error) {
	size, err := helloHeader(b)
	if err != nil {
		return hello{}, err
	}
	if len(b) != size {
		return hello{}, fmt.Errorf("%w: set-up message of %d bytes, header says %d", ErrProtocol, len(b), size)
	}
	h := hello{kind: helloKind(b[6])}
	o := helloFixed
	seen := map[uint64]bool{}
	for range int(b[7]) {
		addr := binary.LittleEndian.Uint64(b[o:])
		if seen[addr] {
			return hello{}, fmt.Errorf("%w: region %#x announced twice", ErrProtocol, addr)
		}
		seen[addr] = true
		h.mrs = append(h.mrs, RemoteMR{
			Addr: binary.LittleEndian.Uint64(b[o:]),
			Key:  binary.LittleEndian.Uint32(b[o+8:]),
			Len:  binary.LittleEndian.Uint64(b[o+12:]),
		})
		o += helloMRSize
	}
	h.private = append([]byte(nil), b[o:]...)
	return h, nil
}
