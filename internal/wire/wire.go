// Package wire is the key-value request and reply encoding that clients
// and region servers exchange as ring message payloads (docs/protocol.md,
// section 3). Decoders never panic on any input and never alias more than
// the input they were given; they return ErrMalformed.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/tebis-go/tebis/rdma/ring"
)

// ErrMalformed: a payload does not follow the encoding.
var ErrMalformed = errors.New("wire: malformed payload")

// Request types (ring message types).
const (
	TypePut      = ring.TypeFirstApp + iota // map version, request id, key, value
	TypeGet                                 // map version, key
	TypeDelete                              // map version, request id, key
	TypeScan                                // map version, start, end, limit, max bytes
	TypeMultiGet                            // map version, keys
	// TypeReplicate is server to server: a replication.Command for the
	// region the header names (the backup's side of a region).
	TypeReplicate
	// TypeStats asks for the server's counters (a JSON reply).
	TypeStats
)

// Reply statuses (ring statuses).
const (
	StatusNotFound    = ring.StatusFirstApp + iota // get: no such key
	StatusWrongRegion                              // payload: the server's map version (u64)
	StatusBadRequest                               // payload: a message
	StatusTooLarge                                 // payload: a message
	StatusUnavailable                              // closing, or not the primary; payload: a message
	StatusInternal                                 // payload: a message
	StatusStaleEpoch                               // replicate: the command's epoch is older than the backup's
	// StatusStorage: the server's disk cannot store the write (full or
	// failing); nothing was acknowledged. Transient like UNAVAILABLE
	// (clients retry, following a newer map: the master moves the
	// server's primaries away); payload: a message naming the server.
	StatusStorage
)

// Scan reply flags.
const (
	ScanRegionEnd = 1 << 0 // the scan reached its region's end; continue in the next region
	ScanMore      = 1 << 1 // limit or byte budget reached inside the region
)

// KeyRequest is a get.
type KeyRequest struct {
	MapVersion uint64
	Key        []byte
}

// RequestID names a write for exactly-once application (docs/protocol.md):
// Client is the client's unique id, Seq the write's sequence number for
// that client (≥ 1), Ack the client's lowest sequence number not yet
// completed (≤ Seq; the client never sends a write below it again). The
// zero RequestID is a write without identity (not deduplicated); any other
// with Client 0, Seq 0 or Ack > Seq is malformed.
type RequestID struct {
	Client, Seq, Ack uint64
}

// RequestIDLen is a RequestID's encoded size.
const RequestIDLen = 24

func (id RequestID) valid() bool {
	if id.Client == 0 {
		return id.Seq == 0 && id.Ack == 0
	}
	return id.Seq != 0 && id.Ack <= id.Seq
}

func (id RequestID) append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, id.Client)
	b = binary.LittleEndian.AppendUint64(b, id.Seq)
	return binary.LittleEndian.AppendUint64(b, id.Ack)
}

func (r *reader) requestID() RequestID {
	id := RequestID{Client: r.u64(), Seq: r.u64(), Ack: r.u64()}
	if r.err == nil && !id.valid() {
		r.err = fmt.Errorf("%w: request id client %d seq %d ack %d", ErrMalformed, id.Client, id.Seq, id.Ack)
	}
	return id
}

// PutRequest is a put.
type PutRequest struct {
	MapVersion uint64
	ID         RequestID
	Key, Value []byte
}

// DeleteRequest is a delete.
type DeleteRequest struct {
	MapVersion uint64
	ID         RequestID
	Key        []byte
}

// ScanRequest asks for up to Limit pairs (and about MaxBytes) from Start
// (inclusive) to End (exclusive; empty: the region's end).
type ScanRequest struct {
	MapVersion uint64
	Start, End []byte
	Limit      uint32
	MaxBytes   uint32
}

// MultiGetRequest is a batch of gets in one region.
type MultiGetRequest struct {
	MapVersion uint64
	Keys       [][]byte
}

// Pair is one scan result.
type Pair struct{ Key, Value []byte }

// ScanReply is a scan's answer.
type ScanReply struct {
	Flags uint8
	Pairs []Pair
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) u32() uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u8() uint8 {
	if r.err != nil || len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated", ErrMalformed)
	}
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return r.err
}

func appendBytes(b, v []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// Encode appends the request to b.
func (q *KeyRequest) Encode(b []byte) []byte {
	b = slices.Grow(b, 8+len(q.Key))
	b = binary.LittleEndian.AppendUint64(b, q.MapVersion)
	return append(b, q.Key...)
}

// DecodeKeyRequest decodes a get; Key aliases b.
func DecodeKeyRequest(b []byte) (KeyRequest, error) {
	r := reader{b: b}
	q := KeyRequest{MapVersion: r.u64()}
	q.Key = r.b
	return q, r.err
}

// Encode appends the request to b.
func (q *PutRequest) Encode(b []byte) []byte {
	b = slices.Grow(b, 8+RequestIDLen+4+len(q.Key)+len(q.Value))
	return append(q.EncodeHead(b), q.Value...)
}

// EncodeHead appends the request without its value, which follows it
// on the wire: EncodeHead then Value is Encode.
func (q *PutRequest) EncodeHead(b []byte) []byte {
	b = slices.Grow(b, 8+RequestIDLen+4+len(q.Key))
	b = binary.LittleEndian.AppendUint64(b, q.MapVersion)
	b = q.ID.append(b)
	return appendBytes(b, q.Key)
}

// DecodePutRequest decodes a put; Key and Value alias b.
func DecodePutRequest(b []byte) (PutRequest, error) {
	r := reader{b: b}
	q := PutRequest{MapVersion: r.u64(), ID: r.requestID(), Key: r.bytes()}
	if r.err != nil {
		return PutRequest{}, r.err
	}
	q.Value = r.b
	return q, nil
}

// Encode appends the request to b.
func (q *DeleteRequest) Encode(b []byte) []byte {
	b = slices.Grow(b, 8+RequestIDLen+len(q.Key))
	b = binary.LittleEndian.AppendUint64(b, q.MapVersion)
	b = q.ID.append(b)
	return append(b, q.Key...)
}

// DecodeDeleteRequest decodes a delete; Key aliases b.
func DecodeDeleteRequest(b []byte) (DeleteRequest, error) {
	r := reader{b: b}
	q := DeleteRequest{MapVersion: r.u64(), ID: r.requestID()}
	if r.err != nil {
		return DeleteRequest{}, r.err
	}
	q.Key = r.b
	return q, nil
}

// Encode appends the request to b.
func (q *ScanRequest) Encode(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, q.MapVersion)
	b = appendBytes(b, q.Start)
	b = appendBytes(b, q.End)
	b = binary.LittleEndian.AppendUint32(b, q.Limit)
	return binary.LittleEndian.AppendUint32(b, q.MaxBytes)
}

// DecodeScanRequest decodes a scan; Start and End alias b.
func DecodeScanRequest(b []byte) (ScanRequest, error) {
	r := reader{b: b}
	q := ScanRequest{MapVersion: r.u64(), Start: r.bytes(), End: r.bytes(), Limit: r.u32(), MaxBytes: r.u32()}
	return q, r.done()
}

// MaxMultiGet bounds the keys of one multi-get.
const MaxMultiGet = 4096

// Encode appends the request to b.
func (q *MultiGetRequest) Encode(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, q.MapVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(q.Keys)))
	for _, k := range q.Keys {
		b = appendBytes(b, k)
	}
	return b
}

// DecodeMultiGetRequest decodes a multi-get; keys alias b.
func DecodeMultiGetRequest(b []byte) (MultiGetRequest, error) {
	r := reader{b: b}
	q := MultiGetRequest{MapVersion: r.u64()}
	n := r.u32()
	if n > MaxMultiGet {
		return q, fmt.Errorf("%w: multi-get of %d keys, limit %d", ErrMalformed, n, MaxMultiGet)
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		q.Keys = append(q.Keys, r.bytes())
	}
	return q, r.done()
}

// EncodeScanReply appends a scan reply to b.
func EncodeScanReply(b []byte, flags uint8, pairs []Pair) []byte {
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(pairs)))
	for _, p := range pairs {
		b = appendBytes(b, p.Key)
		b = appendBytes(b, p.Value)
	}
	return b
}

// DecodeScanReply decodes a scan reply; keys and values alias b.
func DecodeScanReply(b []byte) (ScanReply, error) {
	r := reader{b: b}
	s := ScanReply{Flags: r.u8()}
	n := r.u32()
	if uint64(n) > uint64(len(b))/8 {
		return s, fmt.Errorf("%w: %d pairs in %d bytes", ErrMalformed, n, len(b))
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		s.Pairs = append(s.Pairs, Pair{Key: r.bytes(), Value: r.bytes()})
	}
	return s, r.done()
}

// MultiGet reply: per key, found u8 then (if found) the value as bytes.

// EncodeMultiGetValue appends one multi-get result to b.
func EncodeMultiGetValue(b []byte, v []byte, found bool) []byte {
	if !found {
		return append(b, 0)
	}
	return appendBytes(append(b, 1), v)
}

// DecodeMultiGetReply decodes n results; a missing key's value is nil.
// Values alias b.
func DecodeMultiGetReply(b []byte, n int) ([][]byte, error) {
	r := reader{b: b}
	out := make([][]byte, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		switch r.u8() {
		case 0:
			out = append(out, nil)
		case 1:
			v := r.bytes()
			if v == nil {
				v = []byte{}
			}
			out = append(out, v)
		default:
			return nil, fmt.Errorf("%w: multi-get result flag", ErrMalformed)
		}
	}
	return out, r.done()
}

// EncodeVersion is a WRONG_REGION payload.
func EncodeVersion(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// DecodeVersion decodes a WRONG_REGION payload.
func DecodeVersion(b []byte) (uint64, error) {
	r := reader{b: b}
	v := r.u64()
	return v, r.done()
}
