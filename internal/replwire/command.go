package replwire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Server-to-server commands: what a primary tells a backup about one
// region, in log order. Every command carries the region's epoch; a
// backup refuses commands of an older epoch.
//
// Encoding (little-endian, docs/protocol.md):
//
//	0  u32 magic "TBRC"   4 u8 kind   5 u8 flags (1 sealed, 2 move)
//	6  u8 half   7 u8 src   8 u8 dst   9..15 zero
//	16 u64 region   24 u64 epoch   32 u64 segment   40 u64 seq
//	48 i64 end   56 u64 root   64 u32 height   68 u32 segment count n
//	72 i64 pairs   80 i64 kv bytes   88 i64 nodes
//	96 u64 rp segment   104 i64 rp offset
//	112 n x u64 segments, then the data (index segment image) to the end
const (
	cmdMagic  = 0x43524254 // "TBRC"
	cmdFixed  = 112
	maxCmdSeg = 1 << 16 // segments a level may list
)

// CmdKind says what a command asks.
type CmdKind uint8

const (
	// CmdFlush: persist the buffer half Half up to End as the primary's
	// log segment Segment (records sealed with Seq). Sealed: the segment
	// is full; otherwise a flush before an L0 compaction. With Data, the
	// bytes are Data (the segment's bytes ending at End) instead of the
	// buffer's: a catch-up after a restart.
	CmdFlush CmdKind = iota + 1
	// CmdCompactionStart: a compaction Src -> Dst began (Move: a move).
	CmdCompactionStart
	// CmdIndexSegment: Data is the image of the primary's index segment
	// Segment of the level being built.
	CmdIndexSegment
	// CmdCompactionDone: install level Dst (Root, Height, Pairs, KVBytes,
	// Nodes, Segments); an L0 compaction moves the recovery point to
	// RPSeg:RPOff, RPSeg named with its records' seed in Seq (the number
	// alone is reused by the log; Seq is never 0 there).
	CmdCompactionDone
	// CmdLogFree: the primary freed its log segment Segment, allocated
	// as Seq (the number alone is reused by the log; Seq is never 0).
	CmdLogFree
	// CmdCheck: the first command of a stream; Data is the primary's
	// state (State.Encode). A backup whose adopted log or levels differ
	// refuses it: it missed commands and needs reseeding.
	CmdCheck
	// CmdRebase: sent by a promoted primary before its first check; Data
	// (EncodeRebase) maps each log segment it adopted from the old
	// primary to its own number. The backup renumbers its log map
	// accordingly and drops what the new primary no longer has.
	CmdRebase
	// CmdReset: the first command of a seed: the backup empties its copy
	// of the region (levels and log); the primary then sends its sealed
	// log (flushes with data) and every level (as compactions from L0).
	// A Build-Index backup deletes every key of its region instead.
	CmdReset
	// CmdInSync: the last command of a stream's attach, sent once the
	// backup holds everything acknowledged before the stream (the re-sent
	// tail, the catch-up or seed): its copy is complete from here until a
	// reset, a rebase or a new buffer (replication.Replica.Complete).
	CmdInSync
	// CmdPairs (Build-Index): Data (EncodePairs) is live key/value pairs
	// of the primary, put into the backup's region in order: a seed.
	CmdPairs
	// CmdApplyFrom (Build-Index): Data (Applied.Encode) is the point of
	// a primary's log the backup's region holds everything before, from
	// which its flushes continue: every Build-Index stream names it after
	// the check (the backup's own point, or after a seed the tail's end,
	// or after a catch-up from an old primary's records the promoted
	// region's own point). Flushes before it are refused.
	CmdApplyFrom
	// CmdRequests (Build-Index): Data is one chunk of the primary's
	// completion table (engine.Region.RequestTableChunks), merged into
	// the backup's region (engine.Region.MergeRequestTable): a seed
	// sends the table after the pairs and before CmdApplyFrom, so that
	// a retry of a write the pairs hold is a duplicate on the backup too.
	CmdRequests
)

func (k CmdKind) String() string {
	switch k {
	case CmdFlush:
		return "flush"
	case CmdCompactionStart:
		return "compaction-start"
	case CmdIndexSegment:
		return "index-segment"
	case CmdCompactionDone:
		return "compaction-done"
	case CmdLogFree:
		return "log-free"
	case CmdCheck:
		return "check"
	case CmdRebase:
		return "rebase"
	case CmdReset:
		return "reset"
	case CmdInSync:
		return "in-sync"
	case CmdPairs:
		return "pairs"
	case CmdApplyFrom:
		return "apply-from"
	case CmdRequests:
		return "requests"
	}
	return fmt.Sprintf("cmd(%d)", uint8(k))
}

// ErrMalformed: bytes that do not decode as the message they are read
// as, or a command a backup cannot apply as it reads.
var ErrMalformed = errors.New("replication: malformed command")

// Command is one primary-to-backup command. Fields a kind does not use
// are zero.
type Command struct {
	Kind     CmdKind
	Region   uint64
	Epoch    uint64
	Segment  uint64
	Seq      uint64
	End      int64
	Half     uint8
	Sealed   bool
	Src, Dst uint8
	Move     bool
	Root     uint64
	Height   uint32
	Pairs    int64
	KVBytes  int64
	Nodes    int64
	RPSeg    uint64
	RPOff    int64
	Segments []uint64
	Data     []byte
}

// Size is the length of the command's encoding.
func (c *Command) Size() int { return cmdFixed + 8*len(c.Segments) + len(c.Data) }

// Encode appends the command's encoding to b.
func (c *Command) Encode(b []byte) []byte { return append(c.EncodeHead(b), c.Data...) }

// EncodeHead appends c's encoding without its Data, which follows it on
// the wire (Encode is EncodeHead then Data): a sender that can send two
// slices as one message need not copy a large Data into the encoding.
func (c *Command) EncodeHead(b []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, cmdFixed)...)
	h := b[start:]
	le := binary.LittleEndian
	le.PutUint32(h[0:], cmdMagic)
	h[4] = uint8(c.Kind)
	if c.Sealed {
		h[5] |= 1
	}
	if c.Move {
		h[5] |= 2
	}
	h[6], h[7], h[8] = c.Half, c.Src, c.Dst
	le.PutUint64(h[16:], c.Region)
	le.PutUint64(h[24:], c.Epoch)
	le.PutUint64(h[32:], c.Segment)
	le.PutUint64(h[40:], c.Seq)
	le.PutUint64(h[48:], uint64(c.End))
	le.PutUint64(h[56:], c.Root)
	le.PutUint32(h[64:], c.Height)
	le.PutUint32(h[68:], uint32(len(c.Segments)))
	le.PutUint64(h[72:], uint64(c.Pairs))
	le.PutUint64(h[80:], uint64(c.KVBytes))
	le.PutUint64(h[88:], uint64(c.Nodes))
	le.PutUint64(h[96:], c.RPSeg)
	le.PutUint64(h[104:], uint64(c.RPOff))
	for _, s := range c.Segments {
		b = le.AppendUint64(b, s)
	}
	return b
}

// DecodeCommand parses a command. Data aliases b.
func DecodeCommand(b []byte) (*Command, error) {
	if len(b) < cmdFixed {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	le := binary.LittleEndian
	if le.Uint32(b) != cmdMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	for _, x := range b[9:16] {
		if x != 0 {
			return nil, fmt.Errorf("%w: reserved bytes set", ErrMalformed)
		}
	}
	c := &Command{Kind: CmdKind(b[4]), Sealed: b[5]&1 != 0, Move: b[5]&2 != 0, Half: b[6], Src: b[7], Dst: b[8],
		Region: le.Uint64(b[16:]), Epoch: le.Uint64(b[24:]), Segment: le.Uint64(b[32:]), Seq: le.Uint64(b[40:]),
		End: int64(le.Uint64(b[48:])), Root: le.Uint64(b[56:]), Height: le.Uint32(b[64:]),
		Pairs: int64(le.Uint64(b[72:])), KVBytes: int64(le.Uint64(b[80:])), Nodes: int64(le.Uint64(b[88:])),
		RPSeg: le.Uint64(b[96:]), RPOff: int64(le.Uint64(b[104:]))}
	if c.Kind < CmdFlush || c.Kind > CmdRequests || b[5]&^3 != 0 || c.Half > 1 {
		return nil, fmt.Errorf("%w: kind %d flags %#x half %d", ErrMalformed, b[4], b[5], c.Half)
	}
	n := int(le.Uint32(b[68:]))
	if c.Kind == CmdLogFree && (c.Segment == 0 || c.Seq == 0) {
		return nil, fmt.Errorf("%w: log-free of segment %d seq %d", ErrMalformed, c.Segment, c.Seq)
	}
	if c.Kind == CmdCompactionDone && c.Src == 0 && (c.RPSeg == 0 || c.Seq == 0) {
		return nil, fmt.Errorf("%w: L0 compaction-done with recovery point segment %d seq %d", ErrMalformed, c.RPSeg, c.Seq)
	}
	if n > maxCmdSeg || len(b)-cmdFixed < 8*n {
		return nil, fmt.Errorf("%w: %d segments in %d bytes", ErrMalformed, n, len(b))
	}
	if n > 0 {
		c.Segments = make([]uint64, n)
		for i := range c.Segments {
			c.Segments[i] = le.Uint64(b[cmdFixed+8*i:])
		}
	}
	if rest := b[cmdFixed+8*n:]; len(rest) > 0 {
		if c.Kind != CmdIndexSegment && c.Kind != CmdCheck && c.Kind != CmdFlush && c.Kind != CmdRebase && c.Kind != CmdPairs && c.Kind != CmdApplyFrom && c.Kind != CmdRequests {
			return nil, fmt.Errorf("%w: %s with %d data bytes", ErrMalformed, c.Kind, len(rest))
		}
		c.Data = rest
	}
	return c, nil
}
