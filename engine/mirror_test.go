package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// backupMirror is an in-process Send-Index replica of one primary region:
// a Listener that does on a backup region what the replication package
// does over RDMA. Records are copied into a two-half buffer (never
// cleared, like a backup's registered buffer), sealed and flushed
// segments are adopted from it, index segments are rewritten and written
// as they are built, levels installed with ApplyCompaction, and freed log
// segments dropped. Events arrive from the primary's writer and
// compaction goroutines; mu serializes them, as one command stream does.
type backupMirror struct {
	NopListener
	g  geometry
	bv *Volume
	br *Backup

	mu       sync.Mutex
	buf      [2][]byte
	half     int      // the tail's half of buf
	seg, seq uint64   // the primary's tail segment and its records' seed
	switches int      // tail switches seen
	flush    LogFlush // the last pre-compaction flush: the next L0 compaction's recovery point
	index    map[uint64]uint64
	built    []uint64
	refs     map[uint64]bool
	err      error // the first failure
}

// attachMirror mirrors primary region pr into backup region br from now on.
func attachMirror(t testing.TB, pr *Region, br *Backup) *backupMirror {
	t.Helper()
	tail, err := pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	m := &backupMirror{g: br.v.g, bv: br.v, br: br, seg: tail.Segment, seq: tail.Seq}
	for i := range m.buf {
		m.buf[i] = make([]byte, m.g.segSize)
	}
	copy(m.buf[0], tail.Image)
	pr.SetListener(m)
	return m
}

func (m *backupMirror) WantsRecords() bool { return true }

func (m *backupMirror) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// failed returns the first failure.
func (m *backupMirror) failed() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *backupMirror) LogAppended(e LogAppend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Segment != m.seg {
		m.fail(fmt.Errorf("mirror: append to segment %d, the tail is %d", e.Segment, m.seg))
		return
	}
	copy(m.buf[m.half][e.Offset:], e.Record)
}

func (m *backupMirror) LogSealed(e LogSeal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Segment != m.seg || e.Seq != m.seq {
		m.fail(fmt.Errorf("mirror: seal of segment %d seq %d, the tail is %d seq %d", e.Segment, e.Seq, m.seg, m.seq))
		return
	}
	if _, err := m.br.AdoptLog(e.Segment, e.Seq, m.buf[m.half], e.End); err != nil {
		m.fail(err)
	}
	m.half ^= 1
	m.seg, m.seq = e.Next, e.NextSeq
	m.switches++
}

func (m *backupMirror) LogFlushed(e LogFlush) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush = e
	if e.Segment == m.seg {
		if _, err := m.br.AdoptLog(e.Segment, m.seq, m.buf[m.half], e.End); err != nil {
			m.fail(err)
		}
		return
	}
	for _, l := range m.br.LogSegments() { // sealed since: adopted whole
		if l.Primary == e.Segment && l.End >= e.End {
			return
		}
	}
	m.fail(fmt.Errorf("mirror: flush of segment %d up to %d, neither the tail nor adopted", e.Segment, e.End))
}

func (m *backupMirror) CompactionStarted(c CompactionInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.built { // a compaction that never completed
		m.bv.FreeSegment(s)
	}
	m.index, m.built, m.refs = map[uint64]uint64{}, nil, map[uint64]bool{}
}

// translate maps a pointer of a shipped segment: values through the log
// map, children through this compaction's index map.
func (m *backupMirror) translate(logMap map[uint64]uint64) PointerMap {
	return func(p uint64, value bool) (uint64, error) {
		seg := m.g.seg(p)
		if value && seg == 0 {
			return p, nil // a dead pointer stays dead
		}
		to, ok := m.index[seg]
		if value {
			to, ok = logMap[seg]
		}
		if !ok {
			return 0, fmt.Errorf("mirror: pointer into unmapped segment %d (value %v)", seg, value)
		}
		return m.g.rebase(p, to), nil
	}
}

func (m *backupMirror) SegmentBuilt(_ CompactionInfo, s BuiltSegment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seg, seq, err := m.bv.AllocSegment()
	if err != nil {
		m.fail(err)
		return
	}
	m.index[s.Segment] = seg
	m.built = append(m.built, seg)
	data := append([]byte(nil), s.Data...)
	refs, err := m.bv.RewriteIndexSegment(data, seg, seq, m.translate(m.br.LogMap()))
	if err == nil {
		err = m.bv.WriteSegment(seg, data)
	}
	if err != nil {
		m.fail(err)
		return
	}
	for _, r := range refs {
		m.refs[r] = true
	}
}

func (m *backupMirror) CompactionDone(c CompactionInfo, li LevelInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rp *LogPoint
	if c.Src == 0 {
		local, ok := m.br.LogMap()[m.flush.Segment]
		if !ok {
			m.fail(fmt.Errorf("mirror: recovery point in unadopted segment %d", m.flush.Segment))
			return
		}
		rp = &LogPoint{Segment: local, Offset: m.flush.End}
	}
	var lvl *InstalledLevel
	if !c.Move {
		lvl = &InstalledLevel{Height: li.Height, Pairs: li.Pairs, KVBytes: li.KVBytes, Nodes: li.Nodes}
		if li.Root != 0 {
			root, err := m.translate(nil)(li.Root, false)
			if err != nil {
				m.fail(err)
				return
			}
			lvl.Root = root
		}
		for _, s := range li.Segments {
			lvl.Segments = append(lvl.Segments, m.index[s])
		}
		for s := range m.refs {
			lvl.LogRefs = append(lvl.LogRefs, s)
		}
	}
	if err := m.br.ApplyCompaction(c, lvl, rp); err != nil {
		m.fail(err)
	}
	m.built = nil
}

func (m *backupMirror) LogFreed(e LogFree) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.br.DropLog(e.Segment); err != nil {
		m.fail(err)
	}
}

// tail returns the primary's unflushed tail as the backup's buffer holds
// it (buffer garbage past the records included).
func (m *backupMirror) tail() *PromoteTail {
	m.mu.Lock()
	defer m.mu.Unlock()
	img := bytes.Clone(m.buf[m.half])
	return &PromoteTail{Segment: m.seg, Seq: m.seq, Image: img, End: TailEnd(img, m.seq)}
}

// mirrorPair is a primary region (region 1 of volume "vol" on its own
// MemFS) mirrored into backup region 1 of volume "backup" on bfs, and the
// model of what the primary holds.
type mirrorPair struct {
	pv    *Volume
	pr    *Region
	bo    Options
	bv    *Volume
	br    *Backup
	m     *backupMirror
	model map[string][]byte
}

// mirrorOpts: L0 holds a few segments of log, so promotion replays across
// several adopted segments.
func mirrorOpts(fs vfs.FS, dir string) Options {
	o := smallOpts(fs)
	o.Dir = dir
	o.L0Pairs = 600
	return o
}

const mirrorKeys = 1500

func newMirrorPair(t testing.TB, bfs vfs.FS) *mirrorPair {
	t.Helper()
	p := &mirrorPair{bo: mirrorOpts(bfs, "backup"), model: map[string][]byte{}}
	p.pv = mustOpen(t, mirrorOpts(vfs.NewMem(), "vol"))
	p.pr = mustRegion(t, p.pv, 1)
	p.bv = mustOpen(t, p.bo)
	var err error
	if p.br, err = p.bv.CreateBackupRegion(RegionDesc{ID: 1, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	p.m = attachMirror(t, p.pr, p.br)
	return p
}

// write runs ops random puts (3/4) and deletes on r, keeping the model.
func (p *mirrorPair) write(t testing.TB, r *Region, rng *rand.Rand, ops int) {
	t.Helper()
	for range ops {
		k := key(rng.Intn(mirrorKeys))
		if rng.Intn(4) == 0 {
			if err := r.Delete(k); err != nil {
				t.Fatalf("delete: %v", err)
			}
			delete(p.model, string(k))
			continue
		}
		b := make([]byte, 10+rng.Intn(390))
		rng.Read(b)
		if err := r.Put(k, b); err != nil {
			t.Fatalf("put: %v", err)
		}
		p.model[string(k)] = b
	}
}

// settle waits for the primary's compactions (and so for their mirroring).
func (p *mirrorPair) settle(t testing.TB) {
	t.Helper()
	if err := p.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	if err := p.m.failed(); err != nil {
		t.Fatalf("mirror: %v", err)
	}
}

// shortTail writes until the primary's tail switches, then a few records:
// the tail's buffer half still holds most of the segment it held two
// switches ago.
func (p *mirrorPair) shortTail(t testing.TB, rng *rand.Rand) {
	t.Helper()
	p.m.mu.Lock()
	n := p.m.switches
	p.m.mu.Unlock()
	for {
		p.m.mu.Lock()
		done := p.m.switches > n
		p.m.mu.Unlock()
		if done {
			break
		}
		p.write(t, p.pr, rng, 1)
	}
	p.write(t, p.pr, rng, 10)
}

// checkModel reads every key of the model's key space and scans the
// whole region.
func checkModel(t testing.TB, r *Region, model map[string][]byte, what string) {
	t.Helper()
	check := func(k []byte) {
		got, err := r.Get(k)
		want, ok := model[string(k)]
		switch {
		case !ok && !errors.Is(err, ErrNotFound):
			t.Fatalf("%s: get %s: want not found, got %d bytes, %v", what, k, len(got), err)
		case ok && (err != nil || !bytes.Equal(got, want)):
			t.Fatalf("%s: get %s: %d bytes (want %d), %v", what, k, len(got), len(want), err)
		}
	}
	for i := range mirrorKeys {
		check(key(i))
	}
	for k := range model {
		check([]byte(k))
	}
	if tt, ok := t.(*testing.T); ok {
		checkScan(tt, r, model, nil, nil, 0)
	}
}

// checkVolume runs the inspector's check on a closed volume.
func checkVolume(t testing.TB, fs vfs.FS, dir, what string) VolumeInfo {
	t.Helper()
	in, err := OpenInspector(fs, dir, false)
	if err != nil {
		t.Fatalf("%s: inspect: %v", what, err)
	}
	defer in.Close()
	if rep := in.Check(); !rep.OK() {
		t.Fatalf("%s: check: %+v", what, rep.Problems)
	}
	return in.Summary()
}

// junkFree leaves n free segments of the backup volume full of random
// bytes, as reused segments are: the tail a promotion allocates is one.
func (p *mirrorPair) junkFree(t testing.TB, rng *rand.Rand, n int) {
	t.Helper()
	var segs []uint64
	for range n {
		seg, _, err := p.bv.AllocSegment()
		if err != nil {
			t.Fatal(err)
		}
		junk := make([]byte, p.bv.SegmentSize())
		rng.Read(junk)
		if err := p.bv.writeAt(junk, p.bv.g.fileOff(seg), IOLog); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, seg)
	}
	if err := p.bv.syncData(); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		p.bv.FreeSegment(s)
	}
}
