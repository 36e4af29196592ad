package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Log record kinds (docs/format.md). Kinds 3 and 4 carry a RequestID in
// front of the value; kind 5 is a request-table checkpoint with no key.
const (
	recPut         = 1
	recDelete      = 2
	recPutOnce     = 3
	recDeleteOnce  = 4
	recTable       = 5
	recKindMax     = recTable
	recordIDPrefix = ridLen // bytes of RequestID in front of a kind 3/4 value
)

// recHeaderLen is the fixed part of a log record:
// crc u32 | kind u8 | keyLen u16 | payloadLen u32.
const recHeaderLen = 11

// recordSize is the encoded size of a record whose payload (the value,
// behind the request identity of kinds 3 and 4) is payloadLen bytes.
func recordSize(keyLen, payloadLen int) int { return recHeaderLen + keyLen + payloadLen }

// payloadLen is the payload length of a put or delete record of value
// with request identity id (zero Client: none).
func payloadLen(id RequestID, value []byte) int {
	if id.Client != 0 {
		return ridLen + len(value)
	}
	return len(value)
}

// encodeRecord writes a record into b, which must be recordSize(len(key),
// payloadLen(id, value)) bytes. kind is recPut, recDelete or recTable; a put
// or delete with a non-zero id.Client is written as kind 3 or 4 with the
// identity in front of the value. The checksum is seeded with the segment's
// sequence number so that records left over from an earlier use of the
// segment never verify.
func encodeRecord(b []byte, segSeq uint64, kind uint8, id RequestID, key, value []byte) {
	pl := len(value)
	at := recHeaderLen + len(key)
	if id.Client != 0 && kind != recTable {
		kind += recPutOnce - recPut
		id.encode(b[at:])
		at += ridLen
		pl += ridLen
	}
	b[4] = kind
	binary.LittleEndian.PutUint16(b[5:], uint16(len(key)))
	binary.LittleEndian.PutUint32(b[7:], uint32(pl))
	copy(b[recHeaderLen:], key)
	copy(b[at:], value)
	binary.LittleEndian.PutUint32(b[0:], recordCRC(segSeq, b[4:]))
}

func recordCRC(segSeq uint64, body []byte) uint32 {
	return crc32.Update(seqCRC(segSeq), castagnoli, body)
}

// seqCRC is crc32.Update(0, castagnoli, segSeq as 8 little-endian bytes),
// a byte at a time through the table: passing a stack array to crc32
// moves it to the heap, an allocation per record and per node.
func seqCRC(segSeq uint64) uint32 {
	c := ^uint32(0)
	for i := 0; i < 8; i++ {
		c = castagnoli[byte(c)^byte(segSeq>>(8*i))] ^ c>>8
	}
	return ^c
}

// record is a decoded log record; Key and Value alias the decoded buffer.
// Kind is recPut, recDelete or recTable: kinds 3 and 4 decode as a put or
// delete with ID set. Payload is the stored value-length field (what index
// entries keep as vlen: the record's size follows from it).
type record struct {
	Kind    uint8
	ID      RequestID
	Key     []byte
	Value   []byte
	Payload uint32
	Size    int
}

// decodeRecord parses the record at the start of b. ok is false when b
// holds no complete valid record (the end of a log tail, or corruption:
// the caller decides which).
func decodeRecord(b []byte, segSeq uint64) (r record, ok bool) {
	if len(b) < recHeaderLen {
		return r, false
	}
	kind := b[4]
	if kind < recPut || kind > recKindMax {
		return r, false
	}
	kl := int(binary.LittleEndian.Uint16(b[5:]))
	pl := binary.LittleEndian.Uint32(b[7:])
	n := recHeaderLen + kl + int(pl)
	switch {
	case kind == recTable && kl != 0,
		kind != recTable && (kl == 0 || kl > MaxKeySize),
		(kind == recPutOnce || kind == recDeleteOnce) && pl < ridLen,
		kind == recDeleteOnce && pl != ridLen,
		int64(pl) > int64(len(b)), n > len(b), n < recHeaderLen:
		return r, false
	}
	if binary.LittleEndian.Uint32(b[0:]) != recordCRC(segSeq, b[4:n]) {
		return r, false
	}
	r = record{Kind: kind, Key: b[recHeaderLen : recHeaderLen+kl], Value: b[recHeaderLen+kl : n], Payload: pl, Size: n}
	if kind == recPutOnce || kind == recDeleteOnce {
		r.Kind = kind - (recPutOnce - recPut)
		r.ID = decodeRequestID(r.Value)
		if r.ID.Client == 0 || r.ID.Seq == 0 || r.ID.Ack > r.ID.Seq {
			return record{}, false
		}
		r.Value = r.Value[ridLen:]
	}
	return r, true
}

// errBadRecord builds the corruption error for a record that must exist.
func errBadRecord(seg uint64, off int64, why string) error {
	return fmt.Errorf("%w: segment %d offset %d: log record %s", ErrCorrupt, seg, off, why)
}

// LogRecord kinds, as DecodeLogRecord reports them.
const (
	RecordPut    = recPut
	RecordDelete = recDelete
	// RecordTable is a request-table checkpoint (no key; Region.ApplyLogRecord
	// merges it).
	RecordTable = recTable
)

// DecodeLogRecord parses the log record at the start of b, sealed in a
// segment of sequence segSeq (a record's checksum is seeded with it). ok is
// false when b does not start with a complete record that verifies. Key and
// value alias b; a put or delete that carries a request identity reports
// RecordPut or RecordDelete with the value behind the identity. Backups use
// it to read records mirrored from a primary.
func DecodeLogRecord(b []byte, segSeq uint64) (kind uint8, key, value []byte, size int, ok bool) {
	r, ok := decodeRecord(b, segSeq)
	return r.Kind, r.Key, r.Value, r.Size, ok
}
