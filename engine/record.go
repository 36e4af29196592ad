package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Log record kinds.
const (
	recPut    = 1
	recDelete = 2
)

// recHeaderLen is the fixed part of a log record:
// crc u32 | kind u8 | keyLen u16 | valLen u32.
const recHeaderLen = 11

// recordSize is the encoded size of a record.
func recordSize(keyLen, valLen int) int { return recHeaderLen + keyLen + valLen }

// encodeRecord writes a record into b, which must be recordSize bytes. The
// checksum is seeded with the segment's sequence number so that records left
// over from an earlier use of the segment never verify.
func encodeRecord(b []byte, segSeq uint64, kind uint8, key, value []byte) {
	b[4] = kind
	binary.LittleEndian.PutUint16(b[5:], uint16(len(key)))
	binary.LittleEndian.PutUint32(b[7:], uint32(len(value)))
	copy(b[recHeaderLen:], key)
	copy(b[recHeaderLen+len(key):], value)
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
type record struct {
	Kind  uint8
	Key   []byte
	Value []byte
	Size  int
}

// decodeRecord parses the record at the start of b. ok is false when b
// holds no complete valid record (the end of a log tail, or corruption:
// the caller decides which).
func decodeRecord(b []byte, segSeq uint64) (r record, ok bool) {
	if len(b) < recHeaderLen {
		return r, false
	}
	kind := b[4]
	if kind != recPut && kind != recDelete {
		return r, false
	}
	kl := int(binary.LittleEndian.Uint16(b[5:]))
	vl := int(binary.LittleEndian.Uint32(b[7:]))
	n := recHeaderLen + kl + vl
	if kl == 0 || kl > MaxKeySize || n > len(b) || n < recHeaderLen {
		return r, false
	}
	if binary.LittleEndian.Uint32(b[0:]) != recordCRC(segSeq, b[4:n]) {
		return r, false
	}
	return record{Kind: kind, Key: b[recHeaderLen : recHeaderLen+kl], Value: b[recHeaderLen+kl : n], Size: n}, true
}

// errBadRecord builds the corruption error for a record that must exist.
func errBadRecord(seg uint64, off int64, why string) error {
	return fmt.Errorf("%w: segment %d offset %d: log record %s", ErrCorrupt, seg, off, why)
}

// LogRecord kinds, as DecodeLogRecord reports them.
const (
	RecordPut    = recPut
	RecordDelete = recDelete
)

// DecodeLogRecord parses the log record at the start of b, sealed in a
// segment of sequence segSeq (a record's checksum is seeded with it). ok is
// false when b does not start with a complete record that verifies. Key and
// value alias b. Backups use it to read records mirrored from a primary.
func DecodeLogRecord(b []byte, segSeq uint64) (kind uint8, key, value []byte, size int, ok bool) {
	r, ok := decodeRecord(b, segSeq)
	return r.Kind, r.Key, r.Value, r.Size, ok
}
