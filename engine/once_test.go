package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestReqTableVerdicts(t *testing.T) {
	tb := newReqTable()
	t0 := time.Unix(1000, 0)
	tb.add(RequestID{Client: 7, Seq: 3, Ack: 1}, 300, t0)
	tb.add(RequestID{Client: 7, Seq: 5, Ack: 1}, 500, t0)
	for _, tc := range []struct {
		id   RequestID
		want reqVerdict
		end  uint64
	}{
		{RequestID{Client: 7, Seq: 3, Ack: 1}, reqDuplicate, 300},
		{RequestID{Client: 7, Seq: 5, Ack: 5}, reqDuplicate, 500},
		{RequestID{Client: 7, Seq: 4, Ack: 1}, reqNew, 0}, // concurrent, out of order: not a duplicate
		{RequestID{Client: 8, Seq: 3, Ack: 1}, reqNew, 0}, // another client, same seq
	} {
		if v, end := tb.check(tc.id); v != tc.want || end != tc.end {
			t.Fatalf("check %+v = %v, %d; want %v, %d", tc.id, v, end, tc.want, tc.end)
		}
	}
	// Seq 6 acknowledges everything below 5: 3 is forgotten and stale, 5 is kept.
	tb.add(RequestID{Client: 7, Seq: 6, Ack: 5}, 600, t0)
	if v, _ := tb.check(RequestID{Client: 7, Seq: 3, Ack: 1}); v != reqStale {
		t.Fatalf("seq below the ack: %v, want stale", v)
	}
	if v, end := tb.check(RequestID{Client: 7, Seq: 5, Ack: 5}); v != reqDuplicate || end != 500 {
		t.Fatalf("seq at the ack: %v %d, want duplicate 500", v, end)
	}
	// An older ack arriving late does not lower it.
	tb.add(RequestID{Client: 7, Seq: 7, Ack: 2}, 700, t0)
	if tb.clients[7].ack != 5 || tb.len() != 3 {
		t.Fatalf("ack %d, %d outcomes; want 5, 3", tb.clients[7].ack, tb.len())
	}
	// Expiry by time since the client was last seen.
	tb.add(RequestID{Client: 9, Seq: 1, Ack: 1}, 900, t0.Add(time.Minute))
	tb.expire(t0.Add(time.Minute+30*time.Second), 60*time.Second)
	if _, ok := tb.clients[7]; ok {
		t.Fatal("client 7 idle for 90s survived a 60s retention")
	}
	if v, _ := tb.check(RequestID{Client: 9, Seq: 1, Ack: 1}); v != reqDuplicate {
		t.Fatalf("client 9 seen 30s ago: %v, want duplicate", v)
	}
}

func TestReqTableCheckpointRoundTrip(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	tb := newReqTable()
	for c := uint64(1); c <= 50; c++ {
		ack := uint64(rng.Intn(20) + 1)
		for range rng.Intn(40) {
			s := ack + uint64(rng.Intn(100))
			tb.add(RequestID{Client: c * 1000003, Seq: s, Ack: ack}, 1, time.Time{})
		}
		tb.add(RequestID{Client: c * 1000003, Seq: ack, Ack: ack}, 1, time.Time{})
	}
	for _, max := range []int{reqChunkHeader + reqRowHeader + 8, 100, 1000, maxCheckpointChunk} {
		chunks := tb.encodeChunks(max)
		back := newReqTable()
		for _, c := range chunks {
			if len(c) > max {
				t.Fatalf("max %d: chunk of %d bytes", max, len(c))
			}
			if err := back.merge(c, 1, time.Time{}); err != nil {
				t.Fatalf("max %d: merge: %v", max, err)
			}
		}
		if len(back.clients) != len(tb.clients) || back.len() != tb.len() {
			t.Fatalf("max %d: %d clients %d outcomes back, want %d %d", max, len(back.clients), back.len(), len(tb.clients), tb.len())
		}
		for id, c := range tb.clients {
			b := back.clients[id]
			if b == nil || b.ack != c.ack || len(b.done) != len(c.done) {
				t.Fatalf("max %d: client %d: %+v, want %+v", max, id, b, c)
			}
			for _, d := range c.done {
				if _, ok := b.lookup(d.seq); !ok {
					t.Fatalf("max %d: client %d seq %d lost", max, id, d.seq)
				}
			}
		}
	}
	good := tb.encodeChunks(maxCheckpointChunk)[0]
	for _, bad := range [][]byte{nil, {2, 0, 0, 0, 0}, good[:len(good)-1], append(bytes.Clone(good), 0)} {
		if err := newReqTable().merge(bad, 1, time.Time{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("merge of %d malformed bytes: %v", len(bad), err)
		}
	}
}

// TestReqTableMatchesModel drives the completion table and a plain model
// of its rules (a map per client: an ack forgets the seqs below it, an
// applied seq at or above the ack is remembered with its end) with the
// same random adds, checks and merges: every verdict and every row agree.
func TestReqTableMatchesModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	type row struct {
		ack  uint64
		done map[uint64]uint64
	}
	model := map[uint64]*row{}
	mrow := func(c uint64) *row {
		if model[c] == nil {
			model[c] = &row{done: map[uint64]uint64{}}
		}
		return model[c]
	}
	raise := func(r *row, ack uint64) {
		if ack > r.ack {
			r.ack = ack
			for s := range r.done {
				if s < ack {
					delete(r.done, s)
				}
			}
		}
	}
	tb := newReqTable()
	acks := map[uint64]uint64{}
	for i := range 20000 {
		c := uint64(rng.Intn(3) + 1)
		ack := acks[c] + uint64(rng.Intn(3)) // acks only rise, sometimes by more than one
		acks[c] = ack
		id := RequestID{Client: c, Seq: ack + uint64(rng.Intn(40)), Ack: ack}
		if rng.Intn(5) == 0 && ack > 5 { // a late message: an older ack, maybe a seq the row forgot (stale)
			id.Ack = ack - uint64(rng.Intn(5))
			id.Seq = id.Ack + uint64(rng.Intn(5))
		}
		v, end := tb.check(id)
		r := model[c]
		var mv reqVerdict
		var mend uint64
		switch {
		case r == nil:
			mv = reqNew
		case r.done[id.Seq] != 0:
			mv, mend = reqDuplicate, r.done[id.Seq]
		case id.Seq < r.ack:
			mv = reqStale
		}
		if v != mv || end != mend {
			t.Fatalf("op %d: check %+v: %v %d, model %v %d", i, id, v, end, mv, mend)
		}
		switch rng.Intn(4) {
		case 0: // a checkpoint of this client's row merged in (rebuild)
			seqs := []uint64{id.Seq, id.Seq + 1}
			chunk := binary.LittleEndian.AppendUint32([]byte{reqChunkVersion}, 1)
			chunk = binary.LittleEndian.AppendUint64(chunk, c)
			chunk = binary.LittleEndian.AppendUint64(chunk, ack)
			chunk = binary.LittleEndian.AppendUint32(chunk, uint32(len(seqs)))
			for _, s := range seqs {
				chunk = binary.LittleEndian.AppendUint64(chunk, s)
			}
			e := uint64(i + 1)
			if err := tb.merge(chunk, e, time.Time{}); err != nil {
				t.Fatal(err)
			}
			r := mrow(c)
			raise(r, ack)
			for _, s := range seqs {
				if _, ok := r.done[s]; !ok && s >= r.ack {
					r.done[s] = e
				}
			}
		default:
			if v == reqStale || (v == reqDuplicate && rng.Intn(2) == 0) {
				continue // (a duplicate is sometimes applied again: its end moves)
			}
			e := uint64(i + 1)
			tb.add(id, e, time.Time{})
			r := mrow(c)
			raise(r, id.Ack)
			if id.Seq >= r.ack {
				r.done[id.Seq] = e
			}
		}
	}
	for c, r := range model {
		got := tb.clients[c]
		if got == nil || got.ack != r.ack || len(got.done) != len(r.done) {
			t.Fatalf("client %d: %+v, model %+v", c, got, r)
		}
		for i, d := range got.done {
			if r.done[d.seq] != d.end || (i > 0 && got.done[i-1].seq >= d.seq) {
				t.Fatalf("client %d: row %+v, model %v", c, got.done, r.done)
			}
		}
	}
}

// onceWrites is the interleaving of the issue: client 1's put of A (seq
// 1) is applied, another client puts B, then client 1 retries seq 1 (its
// reply was lost). The retry must not apply A again.
func onceInterleaving(t *testing.T, r *Region, k []byte) {
	t.Helper()
	if applied, err := r.PutOnce(k, []byte("A"), RequestID{Client: 1, Seq: 1, Ack: 1}); err != nil || !applied {
		t.Fatalf("first put: applied %v, %v", applied, err)
	}
	if applied, err := r.PutOnce(k, []byte("B"), RequestID{Client: 2, Seq: 1, Ack: 1}); err != nil || !applied {
		t.Fatalf("other client's put: applied %v, %v", applied, err)
	}
}

func checkValue(t *testing.T, r *Region, k []byte, want string, what string) {
	t.Helper()
	got, err := r.Get(k)
	if want == "" {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: get %s = %q, %v; want not found", what, k, got, err)
		}
		return
	}
	if err != nil || string(got) != want {
		t.Fatalf("%s: get %s = %q, %v; want %q", what, k, got, err, want)
	}
}

func TestPutOnceRetryAfterOtherWriteNotApplied(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r := mustRegion(t, v, 1)
	k := []byte("k")
	onceInterleaving(t, r, k)
	applied, err := r.PutOnce(k, []byte("A"), RequestID{Client: 1, Seq: 1, Ack: 1})
	if err != nil || applied {
		t.Fatalf("retry: applied %v, %v; want a duplicate", applied, err)
	}
	checkValue(t, r, k, "B", "after the retry")

	// Deletes too: client 1 deletes (seq 2), client 2 puts C, client 1's
	// delete is retried.
	if applied, err := r.DeleteOnce(k, RequestID{Client: 1, Seq: 2, Ack: 2}); err != nil || !applied {
		t.Fatalf("delete: applied %v, %v", applied, err)
	}
	if _, err := r.PutOnce(k, []byte("C"), RequestID{Client: 2, Seq: 2, Ack: 2}); err != nil {
		t.Fatal(err)
	}
	if applied, err := r.DeleteOnce(k, RequestID{Client: 1, Seq: 2, Ack: 2}); err != nil || applied {
		t.Fatalf("delete retry: applied %v, %v; want a duplicate", applied, err)
	}
	checkValue(t, r, k, "C", "after the delete's retry")

	// Below the client's ack: refused, not applied.
	if _, err := r.PutOnce(k, []byte("A"), RequestID{Client: 1, Seq: 1, Ack: 1}); !errors.Is(err, ErrStaleRequest) {
		t.Fatalf("seq below the ack: %v, want ErrStaleRequest", err)
	}
	if _, err := r.PutOnce(k, []byte("A"), RequestID{Client: 1, Seq: 3, Ack: 4}); !errors.Is(err, ErrBadRequestID) {
		t.Fatalf("ack above seq: %v, want ErrBadRequestID", err)
	}
	checkValue(t, r, k, "C", "after refused requests")
}

// fillPastRecoveryPoint writes n distinct keys of 200-byte values: with
// mirrorOpts (64 KiB segments, L0 of 600 pairs) the L0 spans several log
// segments, so segments fill and switch without a partial flush between
// them (as with the default 2 MiB segments and 96K-pair L0), and the
// earlier writes end up behind the recovery point after a few compactions.
func fillPastRecoveryPoint(t *testing.T, r *Region, base, n int) {
	t.Helper()
	v := bytes.Repeat([]byte("v"), 200)
	for i := range n {
		if err := r.Put(key(base+i), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
}

func TestPutOnceSurvivesCompactionAndRestart(t *testing.T) {
	fs := vfs.NewMem()
	o := mirrorOpts(fs, "vol")
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	early, late := []byte("early"), []byte("late")
	onceInterleaving(t, r, early)
	// Client 1's first write goes behind the recovery point: only the
	// checkpoints carry its outcome from now on.
	fillPastRecoveryPoint(t, r, 0, 4*o.L0Pairs)
	if len(r.Levels()) == 0 || len(r.LogSegments()) < 3 {
		t.Fatalf("workload too small: levels %v", r.Levels())
	}
	// Client 3's write stays in the log tail (replayed at open).
	if _, err := r.PutOnce(late, []byte("A"), RequestID{Client: 3, Seq: 1, Ack: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutOnce(late, []byte("B"), RequestID{Client: 2, Seq: 2, Ack: 2}); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = mustOpen(t, o)
	defer v.Close()
	r, _ = v.Region(1)
	for _, tc := range []struct {
		k  []byte
		id RequestID
	}{{early, RequestID{Client: 1, Seq: 1, Ack: 1}}, {late, RequestID{Client: 3, Seq: 1, Ack: 1}}} {
		applied, err := r.PutOnce(tc.k, []byte("A"), tc.id)
		if err != nil || applied {
			t.Fatalf("retry of %s after restart: applied %v, %v; want a duplicate", tc.k, applied, err)
		}
		checkValue(t, r, tc.k, "B", "after the retry")
	}
	// A compaction after the restart carries the outcomes on.
	fillPastRecoveryPoint(t, r, 10000, 2*o.L0Pairs)
	if applied, err := r.PutOnce(late, []byte("A"), RequestID{Client: 3, Seq: 1, Ack: 1}); err != nil || applied {
		t.Fatalf("retry after restart and compactions: applied %v, %v", applied, err)
	}
	checkValue(t, r, late, "B", "after the last retry")
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	checkVolume(t, fs, "vol", "after restarts")
}

func TestPutOnceExpiresAfterRetention(t *testing.T) {
	o := mirrorOpts(vfs.NewMem(), "vol")
	o.RequestRetention = time.Minute
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	var now atomic.Int64
	now.Store(time.Unix(1000, 0).UnixNano())
	r.mu.Lock()
	r.now = func() time.Time { return time.Unix(0, now.Load()) }
	r.mu.Unlock()
	if _, err := r.PutOnce([]byte("k"), []byte("A"), RequestID{Client: 1, Seq: 1, Ack: 1}); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(2 * time.Minute))
	fillPastRecoveryPoint(t, r, 0, o.L0Pairs+1) // a freeze expires idle clients
	if n := r.RequestTableLen(); n != 0 {
		t.Fatalf("%d outcomes after the retention passed, want 0", n)
	}
}

// blockingReplicator holds every WaitReplicated until release.
type blockingReplicator struct {
	mu      sync.Mutex
	waits   []uint64
	release chan error
}

func (b *blockingReplicator) WaitReplicated(pos uint64) error {
	b.mu.Lock()
	b.waits = append(b.waits, pos)
	b.mu.Unlock()
	err := <-b.release
	b.release <- err // every waiter gets it
	return err
}

func (b *blockingReplicator) waiting() []uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]uint64(nil), b.waits...)
}

func TestPutOnceRetryWhileFirstInFlight(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("replication_fails=%v", fail), func(t *testing.T) {
			v := mustOpen(t, smallOpts(vfs.NewMem()))
			defer v.Close()
			r := mustRegion(t, v, 1)
			rep := &blockingReplicator{release: make(chan error, 1)}
			r.SetReplicator(rep)
			id := RequestID{Client: 1, Seq: 1, Ack: 1}
			type result struct {
				applied bool
				err     error
			}
			first, retry := make(chan result, 1), make(chan result, 1)
			go func() { a, err := r.PutOnce([]byte("k"), []byte("A"), id); first <- result{a, err} }()
			waitFor(t, func() bool { return len(rep.waiting()) == 1 })
			go func() { a, err := r.PutOnce([]byte("k"), []byte("A"), id); retry <- result{a, err} }()
			waitFor(t, func() bool { return len(rep.waiting()) == 2 || len(retry) > 0 })
			select {
			case res := <-retry:
				t.Fatalf("the retry returned (%+v) before the original was replicated", res)
			default:
			}
			if w := rep.waiting(); w[0] != w[1] {
				t.Fatalf("the retry waits for position %d, the original for %d", w[1], w[0])
			}
			var want error
			if fail {
				want = errors.New("replication failed")
			}
			rep.release <- want
			f, s := <-first, <-retry
			if f.err != want || s.err != want {
				t.Fatalf("original: %v, retry: %v; want %v for both", f.err, s.err, want)
			}
			if !fail && (!f.applied || s.applied) {
				t.Fatalf("original applied %v, retry applied %v", f.applied, s.applied)
			}
			if r.log.pos() != uint64(segHeaderSize)+uint64(recordSize(1, payloadLen(id, []byte("A")))) {
				t.Fatalf("log at %d: more than one record appended", r.log.pos())
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 5000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("condition not reached in 5s")
}

// TestPutOnceSurvivesPromotion: a write replicated to a Send-Index backup,
// then the primary fails; the client's retry to the promoted backup is a
// duplicate, whether the original is behind the recovery point (carried by
// a checkpoint) or in the replayed tail.
func TestPutOnceSurvivesPromotion(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	p := newMirrorPair(t, vfs.NewMem())
	defer p.pv.Close()
	defer p.bv.Close()
	early, late := []byte("early"), []byte("late")
	onceInterleaving(t, p.pr, early)
	p.write(t, p.pr, rng, 3000) // keys key(0..1499): several compactions
	p.settle(t)
	if len(p.br.Levels()) == 0 || p.m.switches < 3 {
		t.Fatalf("workload too small: %d switches, levels %v", p.m.switches, p.br.Levels())
	}
	if _, err := p.pr.PutOnce(late, []byte("A"), RequestID{Client: 3, Seq: 1, Ack: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.pr.DeleteOnce(late, RequestID{Client: 2, Seq: 2, Ack: 2}); err != nil {
		t.Fatal(err)
	}
	p.settle(t)
	p.pr.SetListener(nil) // the primary fails
	nr, err := p.bv.PromoteBackup(1, 2, p.m.tail())
	if err != nil {
		t.Fatal(err)
	}
	if applied, err := nr.PutOnce(early, []byte("A"), RequestID{Client: 1, Seq: 1, Ack: 1}); err != nil || applied {
		t.Fatalf("retry of the compacted write on the promoted backup: applied %v, %v", applied, err)
	}
	checkValue(t, nr, early, "B", "promoted, early key")
	if applied, err := nr.PutOnce(late, []byte("A"), RequestID{Client: 3, Seq: 1, Ack: 1}); err != nil || applied {
		t.Fatalf("retry of the tail write on the promoted backup: applied %v, %v", applied, err)
	}
	checkValue(t, nr, late, "", "promoted, late key")
}

// TestApplyLogRecordFillsTable: a Build-Index backup applying the
// primary's records keeps their identities (a later retry on it is a
// duplicate), skips a re-delivered record, applies a record the primary
// applied even if its seq is below the ack the backup knows, and merges
// the primary's checkpoints.
func TestApplyLogRecordFillsTable(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r := mustRegion(t, v, 1)
	const seq = 99
	rec := func(kind uint8, id RequestID, k, val string) []byte {
		b := make([]byte, recordSize(len(k), payloadLen(id, []byte(val))))
		if kind == recTable {
			b = make([]byte, recordSize(0, len(val)))
		}
		encodeRecord(b, seq, kind, id, []byte(k), []byte(val))
		return b
	}
	apply := func(b []byte) {
		t.Helper()
		n, err := r.ApplyLogRecord(append(b, 0, 0, 0), seq)
		if err != nil || n != len(b) {
			t.Fatalf("apply: %d, %v (record of %d bytes)", n, err, len(b))
		}
	}
	a1 := rec(recPut, RequestID{Client: 1, Seq: 5, Ack: 5}, "k", "A")
	apply(a1)
	apply(rec(recPut, RequestID{Client: 2, Seq: 1, Ack: 1}, "k", "B"))
	apply(a1) // re-delivered
	checkValue(t, r, []byte("k"), "B", "after a re-delivery")
	// The primary applied client 1's seq 3 (its request raced ahead of the
	// ack the backup saw first): the backup applies it too.
	apply(rec(recDelete, RequestID{Client: 1, Seq: 3, Ack: 3}, "k", ""))
	checkValue(t, r, []byte("k"), "", "after a replicated delete below the ack")
	if applied, err := r.PutOnce([]byte("k"), []byte("A"), RequestID{Client: 1, Seq: 5, Ack: 5}); err != nil || applied {
		t.Fatalf("retry on the backup: applied %v, %v", applied, err)
	}
	// A checkpoint names client 7's seq 4, applied before this backup
	// joined.
	tb := newReqTable()
	tb.add(RequestID{Client: 7, Seq: 4, Ack: 2}, 1, time.Time{})
	apply(rec(recTable, RequestID{}, "", string(tb.encodeChunks(maxCheckpointChunk)[0])))
	if applied, err := r.PutOnce([]byte("k"), []byte("X"), RequestID{Client: 7, Seq: 4, Ack: 4}); err != nil || applied {
		t.Fatalf("retry of a checkpointed write: applied %v, %v", applied, err)
	}
	if _, err := r.ApplyLogRecord([]byte{1, 2, 3}, seq); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("apply of garbage: %v", err)
	}
}

// TestPutOnceLargeTableSurvivesRestart: a table too large for one
// checkpoint record (5000 clients: chunks of at most a 64 KiB segment's
// record size) is written as several records that cross log segments, and
// every outcome survives compactions and a restart.
func TestPutOnceLargeTableSurvivesRestart(t *testing.T) {
	fs := vfs.NewMem()
	o := mirrorOpts(fs, "vol")
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	const clients = 5000
	for c := uint64(1); c <= clients; c++ {
		if _, err := r.PutOnce(key(int(c)), []byte("first"), RequestID{Client: c << 20, Seq: c, Ack: c}); err != nil {
			t.Fatal(err)
		}
	}
	fillPastRecoveryPoint(t, r, 100000, 3*o.L0Pairs)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := OpenInspector(fs, "vol", false)
	if err != nil {
		t.Fatal(err)
	}
	checkpoints, segs := 0, map[uint64]bool{}
	if err := in.Log(1, LogPosition{}, func(rec LogRecord) error {
		if rec.Checkpoint {
			checkpoints++
			segs[rec.Position.Index] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if checkpoints < 3 || len(segs) < 2 {
		t.Fatalf("%d checkpoint records in %d log segments: the table never spans records and segments", checkpoints, len(segs))
	}
	v = mustOpen(t, o)
	defer v.Close()
	r, _ = v.Region(1)
	if n := r.RequestTableLen(); n != clients {
		t.Fatalf("%d outcomes after the restart, want %d", n, clients)
	}
	for c := uint64(1); c <= clients; c += 97 {
		if applied, err := r.PutOnce(key(int(c)), []byte("again"), RequestID{Client: c << 20, Seq: c, Ack: c}); err != nil || applied {
			t.Fatalf("client %d's retry: applied %v, %v", c, applied, err)
		}
	}
}

// TestInspectContentSkipsCheckpoints: the offline content of a region
// whose log from the recovery point starts with request-table checkpoints
// holds only its pairs (a checkpoint has no key: it was read as the pair
// "" and the replicas of one region differed by it).
func TestInspectContentSkipsCheckpoints(t *testing.T) {
	fs := vfs.NewMem()
	o := mirrorOpts(fs, "vol")
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	if _, err := r.PutOnce([]byte("once"), []byte("v"), RequestID{Client: 7, Seq: 1, Ack: 1}); err != nil {
		t.Fatal(err)
	}
	fillPastRecoveryPoint(t, r, 0, 2*o.L0Pairs)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := OpenInspector(fs, "vol", false)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	checkpoints := 0
	st := in.states[1]
	if err := in.Log(1, LogPosition{Index: st.rp >> in.g.shift, Offset: in.g.off(st.rp)}, func(rec LogRecord) error {
		if rec.Checkpoint {
			checkpoints++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if checkpoints == 0 {
		t.Fatal("no checkpoint after the recovery point: the test exercises nothing")
	}
	pairs, err := in.Content(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		if len(p.Key) == 0 {
			t.Fatalf("content holds a pair with an empty key (a checkpoint), %d bytes", len(p.Value))
		}
	}
}

// BenchmarkReqTableAdd: one client with a window of requests in flight,
// each carrying the client's ack (its oldest request still out), as a
// pipelining client sends them: the check and add of every write.
func BenchmarkReqTableAdd(b *testing.B) {
	for _, window := range []uint64{16, 64} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			tb := newReqTable()
			for i := range uint64(b.N) {
				seq := i + 1
				id := RequestID{Client: 1, Seq: seq, Ack: max(seq, window) - window + 1}
				if v, _ := tb.check(id); v != reqNew {
					b.Fatalf("seq %d: %v", seq, v)
				}
				tb.add(id, seq, time.Time{})
			}
		})
	}
}
