package engine

import (
	"bytes"
	"errors"
	"math/rand"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPromoteBackup mirrors a primary into a backup region (adopted log,
// shipped levels), promotes the backup with the primary's unflushed tail
// as its buffer holds it, and checks the new primary: every key as the
// primary had it, writes, compaction and GC, the old handle closed, the
// role and epoch after a reopen, a clean inspector check.
func TestPromoteBackup(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	bfs := vfs.NewMem()
	p := newMirrorPair(t, bfs)
	defer p.pv.Close()
	// A segment the backup volume holds and the primary's does not (never
	// committed: free again at a reopen), so the backup adopts the
	// primary's segments under other numbers and sequences.
	if _, err := p.bv.allocSegment(); err != nil {
		t.Fatal(err)
	}
	p.write(t, p.pr, rng, 8000)
	p.settle(t)
	// End shortly after a tail switch, with L0 spanning a whole adopted
	// segment or more.
	for try := 0; ; try++ {
		p.shortTail(t, rng)
		p.settle(t)
		if replaySegments(p.br, p.m.tail()) >= 3 {
			break
		}
		if try == 100 {
			t.Fatalf("L0 never spans three log segments")
		}
	}
	if p.m.switches < 3 || len(p.br.Levels()) == 0 {
		t.Fatalf("workload too small: %d tail switches, levels %v", p.m.switches, p.br.Levels())
	}
	tail := p.m.tail()
	lt, err := p.pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	if tail.Segment != lt.Segment || tail.End != lt.Offset || !bytes.Equal(tail.Image[segHeaderSize:tail.End], lt.Image[segHeaderSize:]) {
		t.Fatalf("buffered tail: segment %d end %d, the primary's %d end %d", tail.Segment, tail.End, lt.Segment, lt.Offset)
	}
	if lastNonZero(tail.Image[tail.End:]) == 0 {
		t.Fatalf("the tail's buffer half holds no older segment's bytes past %d", tail.End)
	}
	p.pr.SetListener(nil) // the primary "fails"
	p.junkFree(t, rng, 3)
	old := p.br
	compactions := p.bv.Stats().Compactions

	nr, err := p.bv.PromoteBackup(1, 2, tail)
	if err != nil {
		t.Fatal(err)
	}
	if nr.Desc().Epoch != 2 || nr.regionCore == old.regionCore {
		t.Fatalf("promoted: epoch %d, a new core %v", nr.Desc().Epoch, nr.regionCore != old.regionCore)
	}
	if r, ok := p.bv.Region(1); !ok || r != nr {
		t.Fatalf("the volume serves %p, want the promoted region %p", r, nr)
	}
	if _, ok := p.bv.Backup(1); ok {
		t.Fatal("the volume still holds region 1 as a backup")
	}
	checkModel(t, nr, p.model, "promoted")
	checkOldHandle(t, old, tail)
	if _, err := p.bv.PromoteBackup(1, 3, nil); !errors.Is(err, ErrBackupRegion) {
		t.Fatalf("promotion of a primary: %v", err)
	}

	// GC of the adopted segments, whatever their garbage estimates (a
	// backup's depend on which merges the primary ran): each one's header
	// must read as the backup's own segment and sequence, its records
	// under the primary's sequence (the numbers differ: the backup volume
	// holds a segment the primary's does not), its live records are
	// relocated and it is freed.
	adopted := adoptedBeforeRP(t, nr)
	var moved int64
	for _, ls := range adopted {
		n, err := nr.gcSegment(ls)
		if err != nil {
			t.Fatalf("gc of adopted segment %d (seq %d, the primary's %d seq %d): %v", ls.seg, ls.seq, ls.primary, ls.recSeq, err)
		}
		moved += n
	}
	if moved == 0 {
		t.Fatalf("gc of %d adopted segments relocated nothing", len(adopted))
	}
	if _, err := nr.GC(); err != nil {
		t.Fatalf("gc after relocating the adopted segments: %v", err)
	}
	for _, ls := range adopted {
		if holdsLogSeq(nr, ls.seq) {
			t.Fatalf("adopted segment %d (seq %d) still in the log after its gc", ls.seg, ls.seq)
		}
	}
	checkModel(t, nr, p.model, "after adopted-segment gc")

	// It serves: writes, deletes, a compaction forced by filling L0, GC
	// after overwrites.
	p.write(t, nr, rng, 3000)
	for i := range p.bo.L0Pairs + 10 {
		k := key(mirrorKeys + i)
		if err := nr.Put(k, k); err != nil {
			t.Fatal(err)
		}
		p.model[string(k)] = k
	}
	if err := nr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	if got := p.bv.Stats().Compactions; got <= compactions {
		t.Fatalf("no compaction after promotion (%d before, %d after)", compactions, got)
	}
	checkModel(t, nr, p.model, "after writes")
	for i := range mirrorKeys {
		k := key(i)
		if err := nr.Put(k, k); err != nil {
			t.Fatal(err)
		}
		p.model[string(k)] = k
	}
	if err := nr.Compact(); err != nil {
		t.Fatal(err)
	}
	// Overwritten segments are freed whole by the compaction once no level
	// points into them, or become candidates: GC frees every candidate.
	candidates := nr.gcCandidates()
	gc, err := nr.GC()
	if err != nil {
		t.Fatalf("gc of the promoted region: %v", err)
	}
	t.Logf("gc after promotion: %+v, %d candidates", gc, len(candidates))
	for _, ls := range candidates {
		if holdsLogSeq(nr, ls.seq) {
			t.Fatalf("gc candidate segment %d (seq %d) still in the log after gc", ls.seg, ls.seq)
		}
	}
	checkModel(t, nr, p.model, "after gc")

	if err := p.bv.Close(); err != nil {
		t.Fatal(err)
	}
	sum := checkVolume(t, bfs, "backup", "promoted volume")
	if len(sum.Regions) != 1 || sum.Regions[0].Role != "primary" || sum.Regions[0].Epoch != 2 {
		t.Fatalf("summary after promotion: %+v", sum.Regions)
	}
	bv := mustOpen(t, p.bo)
	defer bv.Close()
	r, ok := bv.Region(1)
	if !ok || r.Desc().Epoch != 2 {
		t.Fatalf("after reopen: primary region %v", ok)
	}
	checkModel(t, r, p.model, "reopened")
}

// adoptedBeforeRP returns r's sealed log segments wholly before its
// recovery point that were adopted from a primary under another segment
// number and sequence; at least one.
func adoptedBeforeRP(t *testing.T, r *Region) []logSeg {
	t.Helper()
	var out []logSeg
	for _, ls := range sealedBeforeRP(r) {
		if ls.primary != 0 && ls.primary != ls.seg && ls.recSeq != 0 && ls.recSeq != ls.seq {
			out = append(out, ls)
		}
	}
	if len(out) == 0 {
		t.Fatal("no sealed log segment before the recovery point adopted under another number and sequence")
	}
	return out
}

// holdsLogSeq reports whether r's log holds a segment of sequence seq.
func holdsLogSeq(r *Region, seq uint64) bool {
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	for _, ls := range r.log.segs {
		if ls.seq == seq {
			return true
		}
	}
	return false
}

// checkOldHandle: every call on a promoted backup's old handle fails with
// ErrClosed.
func checkOldHandle(t *testing.T, old *Backup, tail *PromoteTail) {
	t.Helper()
	k := key(1)
	calls := map[string]func() error{
		"get":    func() error { _, err := old.Get(k); return err },
		"adopt":  func() error { _, err := old.AdoptLog(tail.Segment, tail.Seq, tail.Image, tail.End); return err },
		"drop":   func() error { return old.DropLog(tail.Segment) },
		"apply":  func() error { return old.ApplyCompaction(CompactionInfo{Src: 1, Dst: 2, Move: true}, nil, nil) },
		"rebase": func() error { return old.RebaseLog(map[uint64]uint64{}) },
		"reset":  old.ResetBackup,
		"scan": func() error {
			it := old.Scan(nil, nil)
			it.Next()
			return it.Err()
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("old handle %s: %v, want ErrClosed", name, err)
		}
	}
}

// TestPromoteBackupNilTail promotes a backup that holds everything (the
// primary compacted its whole L0), after a restart of the backup with
// background work held; and an empty backup.
func TestPromoteBackupNilTail(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	bfs := vfs.NewMem()
	p := newMirrorPair(t, bfs)
	defer p.pv.Close()
	p.write(t, p.pr, rng, 3000)
	if err := p.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	p.settle(t)
	p.pr.SetListener(nil)
	if err := p.bv.Close(); err != nil {
		t.Fatal(err)
	}
	bo := p.bo
	bo.HoldBackground = true
	bv := mustOpen(t, bo)
	defer bv.Close()
	if _, err := bv.CreateBackupRegion(RegionDesc{ID: 2}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2} {
		r, err := bv.PromoteBackup(id, 7, nil)
		if err != nil {
			t.Fatalf("region %d: %v", id, err)
		}
		r.log.mu.Lock()
		up := r.log.flusherUp
		r.log.mu.Unlock()
		if up {
			t.Fatalf("region %d: background work started under HoldBackground", id)
		}
		r.Resume()
	}
	r1, _ := bv.Region(1)
	checkModel(t, r1, p.model, "promoted without a tail")
	r2, _ := bv.Region(2)
	checkModel(t, r2, nil, "promoted empty backup")
	model2 := map[string][]byte{}
	for i := range 500 {
		k := key(i)
		if err := r2.Put(k, k); err != nil {
			t.Fatal(err)
		}
		model2[string(k)] = k
	}
	if err := r2.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := bv.Close(); err != nil {
		t.Fatal(err)
	}
	checkVolume(t, bfs, "backup", "promoted volume")
	bv = mustOpen(t, p.bo)
	r1, ok1 := bv.Region(1)
	r2, ok2 := bv.Region(2)
	if !ok1 || !ok2 || r2.Desc().Epoch != 7 {
		t.Fatalf("after reopen: primaries %v %v", ok1, ok2)
	}
	checkModel(t, r1, p.model, "reopened region 1")
	checkModel(t, r2, model2, "reopened region 2")
}

// TestPromoteBackupRefused: refusals change nothing; the backup goes on
// adopting and promotes afterwards.
func TestPromoteBackupRefused(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	p := newMirrorPair(t, vfs.NewMem())
	defer p.pv.Close()
	defer p.bv.Close()
	p.write(t, p.pr, rng, 1500)
	p.settle(t)
	good := p.m.tail()
	seg := p.bv.SegmentSize()
	bad := map[string]*PromoteTail{
		"end in header":  {Segment: good.Segment, Seq: good.Seq, Image: good.Image, End: segHeaderSize - 1},
		"end at segment": {Segment: good.Segment, Seq: good.Seq, Image: make([]byte, seg+1), End: seg},
		"short image":    {Segment: good.Segment, Seq: good.Seq, Image: good.Image[:good.End-1], End: good.End},
		"no seed":        {Segment: good.Segment, Image: good.Image, End: good.End},
		"no segment":     {Seq: good.Seq, Image: good.Image, End: good.End},
		"past records":   {Segment: good.Segment, Seq: good.Seq, Image: good.Image, End: good.End + 100},
		"other seed":     {Segment: good.Segment, Seq: good.Seq + 1, Image: good.Image, End: good.End},
	}
	for name, tl := range bad {
		if _, err := p.bv.PromoteBackup(1, 2, tl); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := p.bv.PromoteBackup(1, 1, good); !errors.Is(err, ErrBadOptions) {
		t.Errorf("epoch not newer: %v", err)
	}
	if _, err := p.bv.PromoteBackup(9, 2, good); !errors.Is(err, ErrBadOptions) {
		t.Errorf("unknown region: %v", err)
	}
	if _, err := p.pv.PromoteBackup(1, 2, good); !errors.Is(err, ErrBackupRegion) {
		t.Errorf("promotion of a primary: %v", err)
	}
	if r, _ := p.bv.Backup(1); r != p.br {
		t.Fatalf("a refused promotion replaced the backup")
	}
	p.write(t, p.pr, rng, 1500) // the backup still adopts and installs
	p.settle(t)
	nr, err := p.bv.PromoteBackup(1, 2, p.m.tail())
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, nr, p.model, "promoted after refusals")
}

// TestTailEnd: the valid end of a reused buffer half whose bytes past the
// tail's records are an older segment's records, aligned or not, or a
// torn record.
func TestTailEnd(t *testing.T) {
	const oldSeq, newSeq = 11, 12
	image := make([]byte, 64<<10)
	fill := func(seq uint64, n, vlen int) int64 {
		off := int64(segHeaderSize)
		for i := range n {
			v := bytes.Repeat([]byte{byte(seq)}, vlen)
			size := int64(recordSize(len(key(i)), vlen))
			encodeRecord(image[off:off+size], seq, recPut, RequestID{}, key(i), v)
			off += size
		}
		return off
	}
	oldEnd := fill(oldSeq, 200, 100)
	if got := TailEnd(image, oldSeq); got != oldEnd {
		t.Fatalf("older segment's records end at %d, TailEnd %d", oldEnd, got)
	}
	newEnd := fill(newSeq, 50, 100) // same sizes: the old records that follow are aligned
	if got := TailEnd(image, newSeq); got != newEnd {
		t.Fatalf("aligned garbage: TailEnd %d, want %d", got, newEnd)
	}
	if got := TailEnd(image, oldSeq); got != segHeaderSize {
		t.Fatalf("with the other seed: TailEnd %d, want the header size", got)
	}
	shifted := fill(newSeq, 30, 117) // ends in the middle of an old record
	if got := TailEnd(image, newSeq); got != shifted {
		t.Fatalf("unaligned garbage: TailEnd %d, want %d", got, shifted)
	}
	torn := make([]byte, recordSize(len(key(30)), 117))
	encodeRecord(torn, newSeq, recPut, RequestID{}, key(30), bytes.Repeat([]byte{1}, 117))
	copy(image[shifted:], torn[:len(torn)/2])
	if got := TailEnd(image, newSeq); got != shifted {
		t.Fatalf("torn record: TailEnd %d, want %d", got, shifted)
	}
	if got := TailEnd(image[:shifted], newSeq); got != shifted {
		t.Fatalf("image ending at the last record: TailEnd %d, want %d", got, shifted)
	}
	if got := TailEnd(make([]byte, 100), newSeq); got != segHeaderSize {
		t.Fatalf("short image: TailEnd %d", got)
	}
}

// replaySegments counts the log segments a promotion of backup r with
// tail replays: those adopted from the recovery point on, and the tail.
func replaySegments(r *Backup, tail *PromoteTail) int {
	r.mu.RLock()
	rpIdx := r.rp >> r.v.g.shift
	r.mu.RUnlock()
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	n := 1
	for _, s := range r.log.segs {
		if s.primary == tail.Segment {
			n--
		}
		if s.idx >= rpIdx {
			n++
		}
	}
	return n
}

// TestRebaseLog renames a backup's log map to a new primary's segment
// numbers: atomically (an incomplete or conflicting map changes nothing),
// persistently, keeping the records' seeds, so that the backup adopts in
// the new numbers, checks clean, and promotes.
func TestRebaseLog(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	bfs := vfs.NewMem()
	p := newMirrorPair(t, bfs)
	defer p.pv.Close()
	p.write(t, p.pr, rng, 4000)
	if err := p.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	p.settle(t)
	p.pr.SetListener(nil)
	before := p.br.LogSegments()
	if len(before) < 2 {
		t.Fatalf("backup log of %d segments", len(before))
	}
	full := map[uint64]uint64{}
	for _, l := range before {
		full[l.Primary] = l.Primary + 1000
	}
	full[99999] = 5 // a segment the backup does not hold: ignored
	incomplete := map[uint64]uint64{}
	for _, l := range before[1:] {
		incomplete[l.Primary] = l.Primary + 1000
	}
	twice := map[uint64]uint64{}
	for k, v := range full {
		twice[k] = v
	}
	twice[before[0].Primary] = before[1].Primary + 1000
	zero := map[uint64]uint64{}
	for k, v := range full {
		zero[k] = v
	}
	zero[before[0].Primary] = 0
	for name, m := range map[string]map[uint64]uint64{"incomplete": incomplete, "duplicate target": twice, "target 0": zero} {
		if err := p.br.RebaseLog(m); !errors.Is(err, ErrBadOptions) {
			t.Fatalf("%s: %v", name, err)
		}
		if got := p.br.LogSegments(); !slices.Equal(got, before) {
			t.Fatalf("%s: log changed to %v", name, got)
		}
	}
	if err := p.br.RebaseLog(full); err != nil {
		t.Fatal(err)
	}
	want := make([]LogSegment, len(before))
	for i, l := range before {
		want[i] = l
		want[i].Primary = l.Primary + 1000
	}
	if got := p.br.LogSegments(); !slices.Equal(got, want) {
		t.Fatalf("after rebase: %v, want %v", got, want)
	}
	lm := p.br.LogMap()
	for _, l := range want {
		if lm[l.Primary] != l.Segment {
			t.Fatalf("log map %v lacks %d -> %d", lm, l.Primary, l.Segment)
		}
	}
	last := want[len(want)-1]
	img := make([]byte, p.bv.SegmentSize())
	if seg, err := p.br.AdoptLog(last.Primary, last.Seq, img, last.End); err != nil || seg != last.Segment {
		t.Fatalf("adopt by the new number: segment %d (want %d), %v", seg, last.Segment, err)
	}
	if err := p.bv.Close(); err != nil {
		t.Fatal(err)
	}
	checkVolume(t, bfs, "backup", "rebased backup")
	in, err := OpenInspector(bfs, "backup", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range want { // adopted records verify with the primary's seed
		if d, err := in.Segment(l.Segment); err != nil || d.Bytes != l.End-segHeaderSize {
			t.Fatalf("inspect segment %d: %d bytes of records, adopted up to %d: %v", l.Segment, d.Bytes, l.End, err)
		}
	}
	in.Close()
	bv := mustOpen(t, p.bo)
	defer bv.Close()
	br, ok := bv.Backup(1)
	if !ok {
		t.Fatal("after reopen: no backup region 1")
	}
	if got := br.LogSegments(); !slices.Equal(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
	nr, err := bv.PromoteBackup(1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, nr, p.model, "promoted after rebase")
}

// TestPromoteBackupReaders: reads of the old handle in progress at the
// promotion (here an open scan) keep their segments: the promoted region
// compacts and collects garbage meanwhile, but frees nothing until the
// scan is closed.
func TestPromoteBackupReaders(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	p := newMirrorPair(t, vfs.NewMem())
	defer p.pv.Close()
	defer p.bv.Close()
	p.write(t, p.pr, rng, 6000)
	p.settle(t)
	p.pr.SetListener(nil)
	old := p.br
	var want []Pair // a backup reads its levels
	it := old.Scan(nil, nil)
	for it.Next() {
		want = append(want, Pair{Key: bytes.Clone(it.Key()), Value: bytes.Clone(it.Value())})
	}
	if err := it.Close(); err != nil || len(want) == 0 {
		t.Fatalf("backup scan: %d pairs, %v", len(want), err)
	}
	it = old.Scan(nil, nil)
	nr, err := p.bv.PromoteBackup(1, 2, p.m.tail())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		for i := range mirrorKeys {
			if err := nr.Put(key(i), key(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := nr.Compact(); err != nil {
			t.Fatal(err)
		}
		if _, err := nr.GC(); err != nil {
			t.Fatal(err)
		}
	}
	held := p.bv.Stats().SegmentsFree
	for i := 0; it.Next(); i++ {
		if i >= len(want) || !bytes.Equal(it.Key(), want[i].Key) || !bytes.Equal(it.Value(), want[i].Value) {
			t.Fatalf("old scan at pair %d: key %q differs from before the promotion", i, it.Key())
		}
	}
	if err := it.Close(); err != nil {
		t.Fatalf("old scan: %v", err)
	}
	if freed := p.bv.Stats().SegmentsFree; freed <= held {
		t.Fatalf("closing the old scan freed nothing (%d free before, %d after)", held, freed)
	}
	if _, err := old.Get(key(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("old handle get: %v", err)
	}
}
