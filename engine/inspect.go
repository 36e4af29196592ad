package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// ErrLocked: the volume is open in a live process (its LOCK is held).
var ErrLocked = errors.New("engine: volume is in use")

// Inspector reads a volume offline and never writes to it: the metadata
// store is opened read-only, the segment file for reading, nothing is
// recovered or repaired. Not safe for concurrent use.
type Inspector struct {
	fs      vfs.FS
	dir     string
	lock    io.Closer
	meta    *pebble.DB
	file    vfs.File
	g       geometry
	size    int64 // bytes of the segment file
	states  map[uint64]*regionState
	seqs    map[uint64]uint64 // segment -> sequence, of every referenced segment
	recSeqs map[uint64]uint64 // log segment -> the seed of its records' checksums
}

// OpenInspector opens dir read-only. A volume a live process holds is
// refused with ErrLocked unless force is set (reads may then see a state
// in the middle of a change).
func OpenInspector(fs vfs.FS, dir string, force bool) (*Inspector, error) {
	if fs == nil {
		fs = vfs.Default
	}
	in := &Inspector{fs: fs, dir: dir}
	if _, err := fs.Stat(fs.PathJoin(dir, volumeMarker)); err != nil {
		return nil, fmt.Errorf("engine: %s is not a volume: %w", dir, err)
	}
	lock, err := fs.Lock(fs.PathJoin(dir, "LOCK"))
	switch {
	case err == nil:
		in.lock = lock
	case !force:
		return nil, fmt.Errorf("%w: %s: %v (stop the server, or force a read-only look)", ErrLocked, dir, err)
	}
	if err := in.open(force); err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

func (in *Inspector) open(force bool) error {
	metaDir := in.fs.PathJoin(in.dir, "meta")
	mfs := in.fs
	if force {
		// A live server holds pebble's own lock: read a snapshot copy.
		mem := vfs.NewMem()
		if _, err := vfs.Clone(in.fs, mem, metaDir, "meta"); err != nil {
			return fmt.Errorf("engine: copy metadata: %w", err)
		}
		mfs, metaDir = mem, "meta"
	}
	db, err := pebble.Open(metaDir, &pebble.Options{FS: mfs, ReadOnly: true, Logger: pebbleLogger{zap.NewNop()}})
	if err != nil {
		return fmt.Errorf("engine: open metadata read-only: %w", err)
	}
	in.meta = db
	v := &Volume{meta: db, fs: in.fs}
	if err := v.loadSuper(0, 0); err != nil {
		return err
	}
	in.g = v.g
	if in.file, err = in.fs.Open(in.fs.PathJoin(in.dir, dataFileName)); err != nil {
		return fmt.Errorf("engine: open segments: %w", err)
	}
	fi, err := in.file.Stat()
	if err != nil {
		return err
	}
	in.size = fi.Size()
	if in.states, err = v.loadRegionStates(); err != nil {
		return err
	}
	in.seqs, in.recSeqs = map[uint64]uint64{}, map[uint64]uint64{}
	for _, st := range in.states {
		for _, s := range st.usedSegments() {
			in.seqs[s.seg] = s.seq
		}
		for _, l := range st.logs {
			in.recSeqs[l.seg] = l.recordSeq()
		}
	}
	return nil
}

// Close releases the files and the lock.
func (in *Inspector) Close() error {
	var errs []error
	if in.meta != nil {
		errs = append(errs, in.meta.Close())
	}
	if in.file != nil {
		errs = append(errs, in.file.Close())
	}
	if in.lock != nil {
		errs = append(errs, in.lock.Close())
	}
	return errors.Join(errs...)
}

// VolumeInfo summarizes a volume.
type VolumeInfo struct {
	SegmentSize  int64        `json:"segment_size"`
	NodeSize     int          `json:"node_size"`
	FileSegments int64        `json:"file_segments"` // segments the file spans (segment 0 unused)
	UsedSegments int          `json:"used_segments"` // referenced by some region
	FreeSegments int64        `json:"free_segments"` // in the file, not referenced
	Regions      []RegionInfo `json:"regions"`
}

// RegionInfo summarizes one region's persisted state.
type RegionInfo struct {
	ID            uint64        `json:"id"`
	Role          string        `json:"role"` // primary, backup (a Send-Index backup region) or follower (a Build-Index backup's)
	Epoch         uint64        `json:"epoch"`
	Start         []byte        `json:"start"`
	End           []byte        `json:"end"`
	RecoveryPoint LogPosition   `json:"recovery_point"`
	Log           []LogSegInfo  `json:"log"`
	Levels        []LevelSketch `json:"levels"`
}

// LogPosition is a position in a region's log: segment index and offset.
type LogPosition struct {
	Index  uint64 `json:"index"`
	Offset int64  `json:"offset"`
}

// LogSegInfo is one value-log segment.
type LogSegInfo struct {
	Index   uint64 `json:"index"`
	Segment uint64 `json:"segment"`
	Seq     uint64 `json:"seq"`
	End     int64  `json:"end"` // 0: the tail (or not sealed yet)
	Garbage int64  `json:"garbage_bytes"`
}

// LevelSketch is one on-device level's descriptor.
type LevelSketch struct {
	Level    int      `json:"level"`
	Height   int      `json:"height"`
	Root     uint64   `json:"root"`
	Nodes    int64    `json:"nodes"`
	Pairs    int64    `json:"keys"`
	KVBytes  int64    `json:"kv_bytes"`
	Segments []uint64 `json:"segments"`
}

// Summary describes the volume and every region.
func (in *Inspector) Summary() VolumeInfo {
	vi := VolumeInfo{SegmentSize: in.g.segSize, NodeSize: in.g.nodeSize, FileSegments: in.fileSegments(), UsedSegments: len(in.seqs)}
	vi.FreeSegments = max(vi.FileSegments-1-int64(len(in.seqs)), 0)
	for _, id := range in.regionIDs() {
		vi.Regions = append(vi.Regions, in.regionInfo(id))
	}
	return vi
}

// fileSegments is how many segments the file reaches into.
func (in *Inspector) fileSegments() int64 { return (in.size + in.g.segSize - 1) / in.g.segSize }

func (in *Inspector) regionIDs() []uint64 {
	ids := make([]uint64, 0, len(in.states))
	for id := range in.states {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func (in *Inspector) regionInfo(id uint64) RegionInfo {
	st := in.states[id]
	ri := RegionInfo{ID: id, Role: "primary", Epoch: st.desc.Epoch, Start: st.desc.Start, End: st.desc.End,
		RecoveryPoint: LogPosition{Index: st.rp >> in.g.shift, Offset: in.g.off(st.rp)}}
	switch {
	case st.backup:
		ri.Role = roleBackup
	case st.follower:
		ri.Role = roleFollower
	}
	for _, l := range st.logs {
		ri.Log = append(ri.Log, LogSegInfo{Index: l.idx, Segment: l.seg, Seq: l.seq, End: l.end, Garbage: l.garbage})
	}
	for _, n := range levelNumbers(st) {
		l := st.levels[n]
		ls := LevelSketch{Level: n, Height: l.height, Root: l.root, Nodes: l.nodes, Pairs: l.pairs, KVBytes: l.kvBytes}
		for _, s := range l.segs {
			ls.Segments = append(ls.Segments, s.seg)
		}
		ri.Levels = append(ri.Levels, ls)
	}
	return ri
}

func levelNumbers(st *regionState) []int {
	ns := make([]int, 0, len(st.levels))
	for n := range st.levels {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	return ns
}

// NodeDump is a decoded node.
type NodeDump struct {
	Ptr     uint64      `json:"ptr"`
	Segment uint64      `json:"segment"`
	Offset  int64       `json:"offset"`
	Leaf    bool        `json:"leaf"`
	Height  int         `json:"height"`
	Entries []NodeEntry `json:"entries"`
}

// NodeEntry is one key of a node: a leaf's value pointer or an internal
// node's child.
type NodeEntry struct {
	Key       []byte `json:"key"`
	Ptr       uint64 `json:"ptr"`
	ValueLen  uint32 `json:"value_len,omitempty"`
	Tombstone bool   `json:"tombstone,omitempty"`
}

// PtrString renders a device pointer as segment:offset.
func (in *Inspector) PtrString(p uint64) string {
	return fmt.Sprintf("%d:%d", in.g.seg(p), in.g.off(p))
}

// ParsePtr reads "segment:offset" or a raw number.
func (in *Inspector) ParsePtr(s string) (uint64, error) {
	var seg, off uint64
	if n, _ := fmt.Sscanf(s, "%d:%d", &seg, &off); n == 2 {
		if off >= uint64(in.g.segSize) {
			return 0, fmt.Errorf("offset %d is past a segment of %d bytes", off, in.g.segSize)
		}
		return in.g.ptr(seg, int64(off)), nil
	}
	var p uint64
	if _, err := fmt.Sscanf(s, "%d", &p); err != nil {
		return 0, fmt.Errorf("pointer %q: want SEGMENT:OFFSET or a number", s)
	}
	return p, nil
}

// node reads and verifies the node at p.
func (in *Inspector) node(p uint64) (*node, error) {
	seg, off := in.g.seg(p), in.g.off(p)
	if seg == 0 || off < segHeaderSize || (off-segHeaderSize)%int64(in.g.nodeSize) != 0 || off+int64(in.g.nodeSize) > in.g.segSize {
		return nil, fmt.Errorf("%w: segment %d offset %d: invalid node pointer", ErrCorrupt, seg, off)
	}
	seq, ok := in.seqs[seg]
	if !ok {
		h, err := in.segHeader(seg)
		if err != nil {
			return nil, err
		}
		seq = h.Seq
	}
	buf := make([]byte, in.g.nodeSize)
	if _, err := in.file.ReadAt(buf, in.g.filePtrOff(p)); err != nil {
		return nil, fmt.Errorf("engine: segment %d offset %d: read node: %w", seg, off, err)
	}
	return decodeNode(buf, p, in.g, seq)
}

// Node decodes the node at p.
func (in *Inspector) Node(p uint64) (NodeDump, error) {
	n, err := in.node(p)
	if err != nil {
		return NodeDump{}, err
	}
	return in.dump(p, n), nil
}

func (in *Inspector) dump(p uint64, n *node) NodeDump {
	d := NodeDump{Ptr: p, Segment: in.g.seg(p), Offset: in.g.off(p), Leaf: n.leaf, Height: n.height}
	for i, k := range n.keys {
		e := NodeEntry{Key: bytes.Clone(k), Ptr: n.ptrs[i]}
		if n.leaf {
			e.ValueLen, e.Tombstone = n.vlens[i], n.flags[i]&flagTombstone != 0
		}
		d.Entries = append(d.Entries, e)
	}
	return d
}

// Tree walks a level's B+tree depth-first, calling fn for every node with
// its depth from the root.
func (in *Inspector) Tree(region uint64, level int, fn func(depth int, n NodeDump) error) error {
	st, ok := in.states[region]
	if !ok {
		return fmt.Errorf("engine: no region %d", region)
	}
	l, ok := st.levels[level]
	if !ok {
		return fmt.Errorf("engine: region %d has no level %d", region, level)
	}
	var walk func(p uint64, depth int) error
	walk = func(p uint64, depth int) error {
		n, err := in.node(p)
		if err != nil {
			return err
		}
		if err := fn(depth, in.dump(p, n)); err != nil {
			return err
		}
		if !n.leaf {
			for _, c := range n.ptrs {
				if err := walk(c, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(l.root, 0)
}

// SegmentDump is a decoded segment header and what the segment holds.
type SegmentDump struct {
	Segment    uint64 `json:"segment"`
	Kind       string `json:"kind"`
	Region     uint64 `json:"region"`
	Level      int    `json:"level,omitempty"`
	Height     int    `json:"height,omitempty"`
	Seq        uint64 `json:"seq"`
	PrimarySeg uint64 `json:"primary_segment"`
	Referenced bool   `json:"referenced"`        // by the metadata
	Nodes      int    `json:"nodes,omitempty"`   // index: nodes that verify
	Records    int    `json:"records,omitempty"` // log: records that verify from the start
	Bytes      int64  `json:"bytes,omitempty"`   // log: bytes of those records
}

func (in *Inspector) segHeader(seg uint64) (segHeader, error) {
	if seg == 0 || in.g.fileOff(seg) >= in.size {
		return segHeader{}, fmt.Errorf("engine: segment %d is outside the volume (%d segments)", seg, in.fileSegments())
	}
	b := make([]byte, segHeaderLen)
	if _, err := in.file.ReadAt(b, in.g.fileOff(seg)); err != nil {
		return segHeader{}, fmt.Errorf("engine: segment %d: read header: %w", seg, err)
	}
	return decodeSegHeader(b, seg)
}

// Segment decodes segment n's header and counts its nodes or records.
func (in *Inspector) Segment(n uint64) (SegmentDump, error) {
	h, err := in.segHeader(n)
	if err != nil {
		return SegmentDump{}, err
	}
	_, ref := in.seqs[n]
	d := SegmentDump{Segment: n, Region: h.Region, Seq: h.Seq, PrimarySeg: h.PrimarySeg, Referenced: ref}
	data := make([]byte, in.g.segSize)
	if _, err := in.file.ReadAt(data, in.g.fileOff(n)); err != nil && !errors.Is(err, io.EOF) {
		return d, err
	}
	if h.Kind == segKindIndex {
		d.Kind, d.Level, d.Height = "index", int(h.Level), int(h.Height)
		for off := int64(segHeaderSize); off+int64(in.g.nodeSize) <= in.g.segSize; off += int64(in.g.nodeSize) {
			if _, err := decodeNode(data[off:off+int64(in.g.nodeSize)], in.g.ptr(n, off), in.g, h.Seq); err == nil {
				d.Nodes++
			}
		}
		return d, nil
	}
	d.Kind = "log"
	seed := h.Seq
	if s, ok := in.recSeqs[n]; ok {
		seed = s // an adopted segment: the primary's sequence
	}
	for off := int64(segHeaderSize); off < in.g.segSize; {
		rec, ok := decodeRecord(data[off:], seed)
		if !ok {
			break
		}
		d.Records++
		d.Bytes += int64(rec.Size)
		off += int64(rec.Size)
	}
	return d, nil
}

// LogRecord is one decoded value-log record.
type LogRecord struct {
	Position  LogPosition `json:"position"`
	Ptr       uint64      `json:"ptr"`
	Key       []byte      `json:"key"`
	ValueLen  int         `json:"value_len"`
	Value     []byte      `json:"-"`
	Tombstone bool        `json:"tombstone,omitempty"`
	// Request is the write's identity (zero: none).
	Request RequestID `json:"request,omitempty"`
	// Checkpoint marks a request-table checkpoint (no key; Value is the
	// encoded chunk).
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// Log reads a region's log records in order from position from (segment
// index, offset; offset 0 means the first record), calling fn for each,
// until the log's end or fn returns an error. A record that fails its
// checksum before a sealed segment's end is reported as corruption.
func (in *Inspector) Log(region uint64, from LogPosition, fn func(LogRecord) error) error {
	st, ok := in.states[region]
	if !ok {
		return fmt.Errorf("engine: no region %d", region)
	}
	for _, ls := range st.logs {
		if ls.idx < from.Index {
			continue
		}
		start := int64(segHeaderSize)
		if ls.idx == from.Index && from.Offset > start {
			start = from.Offset
		}
		if err := in.segmentRecords(region, ls, start, fn); err != nil {
			return err
		}
	}
	return nil
}

func (in *Inspector) segmentRecords(region uint64, ls *logSeg, start int64, fn func(LogRecord) error) error {
	data := make([]byte, in.g.segSize)
	if _, err := in.file.ReadAt(data, in.g.fileOff(ls.seg)); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("engine: segment %d: read log: %w", ls.seg, err)
	}
	h, err := decodeSegHeader(data, ls.seg)
	if err != nil {
		return err
	}
	if h.Kind != segKindLog || h.Seq != ls.seq || h.Region != region {
		return fmt.Errorf("%w: segment %d: header (kind %d, seq %d, region %d) does not match the log entry (seq %d, region %d)",
			ErrCorrupt, ls.seg, h.Kind, h.Seq, h.Region, ls.seq, region)
	}
	end := in.g.segSize
	if ls.end != 0 {
		end = ls.end
	}
	for off := start; off < end; {
		rec, ok := decodeRecord(data[off:end], ls.recordSeq())
		if !ok {
			if ls.end != 0 {
				return errBadRecord(ls.seg, off, "fails its checksum before the segment's sealed end")
			}
			return nil
		}
		r := LogRecord{Position: LogPosition{Index: ls.idx, Offset: off}, Ptr: in.g.ptr(ls.seg, off),
			Key: rec.Key, ValueLen: len(rec.Value), Value: rec.Value, Tombstone: rec.Kind == recDelete,
			Request: rec.ID, Checkpoint: rec.Kind == recTable}
		if err := fn(r); err != nil {
			return err
		}
		off += int64(rec.Size)
	}
	return nil
}
