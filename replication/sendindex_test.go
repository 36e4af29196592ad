package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/rdma"
	"go.uber.org/zap/zaptest"
)

// replGroup is one primary region with backups, in process: the log is
// mirrored over the loopback transport, commands go through LocalLinks.
type replGroup struct {
	t       *testing.T
	fs      vfs.FS
	opts    func(dir string) engine.Options
	pv      *engine.Volume
	pr      *engine.Region
	bvs     []*engine.Volume
	reps    []*Replica
	modes   []Mode
	ends    []*backupEnd
	mirror  *Mirror
	shipper *Shipper
	strict  bool                         // follow: a strict shipper
	onDrop  func(name string, err error) // follow: its OnDrop
	// follow: backups pre-seeded (by name, "b<i>"), and faults (or
	// counters) on backup i's link
	preseeded map[string]*Preseeded
	linkFail  map[int]func(*Command) error
	// Build-Index: the primary's log identity (a new one per primary), and
	// the handover follow passes to a promoted primary's stream
	logID    uint64
	handover *Handover
	// follow: the stream's MinCopies and joining backups (by name)
	minCopies int
	joining   []string
	// follow and reattachKeepingBuffers: the stream's Credits (0: 2)
	credits int
}

func (g *replGroup) creditsOr2() int {
	if g.credits > 0 {
		return g.credits
	}
	return 2
}

func replOpts(fs vfs.FS, l0 int) func(string) engine.Options {
	return func(dir string) engine.Options {
		return engine.Options{FS: fs, Dir: dir, SegmentSize: mirrorSeg, L0Pairs: l0, GrowthFactor: 2,
			SyncMode: engine.SyncModeAsync, GCInterval: -1}
	}
}

// autoGC makes the primary's GC run every few milliseconds, concurrently
// with writes and compactions.
func autoGC(o engine.Options) engine.Options {
	o.GCInterval, o.GCGarbageRatio = 2*time.Millisecond, 0.2
	return o
}

// newReplGroup starts a primary and one backup per mode. fail, if set,
// injects faults into backup i's link.
func newReplGroup(t *testing.T, l0 int, modes []Mode, fail map[int]func(*Command) error, primaryOpts ...func(engine.Options) engine.Options) *replGroup {
	g := &replGroup{t: t, fs: vfs.NewCrashableMem(), modes: modes} // crash clones: promote_durable_test.go
	g.opts = replOpts(g.fs, l0)
	po := g.opts("p")
	for _, f := range primaryOpts {
		po = f(po)
	}
	var err error
	if g.pv, err = engine.Open(po); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.pv.Close() })
	if g.pr, err = g.pv.CreateRegion(engine.RegionDesc{ID: 7}); err != nil {
		t.Fatal(err)
	}
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("si%d", loopAddrs) }, len(modes))
	g.ends = ends
	tail, err := g.pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	if g.mirror, err = NewMirror(mirrorSeg, tail.Segment, cq, bs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.mirror.Close() })
	links := map[string]Link{}
	for i, m := range modes {
		bv, err := engine.Open(g.opts(fmt.Sprintf("b%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bv.Close() })
		g.bvs = append(g.bvs, bv)
		rep := g.newReplica(i, bv, m, true)
		links[bs[i].Name] = &LocalLink{Replica: rep, Fail: fail[i]}
	}
	g.logID = 1
	g.shipper, err = startShipper(ShipperConfig{Region: g.pr, Epoch: 3, Mode: modes[0], SegSize: mirrorSeg, Mirror: g.mirror,
		Links: links, Credits: 2, Log: zaptest.NewLogger(t), LogID: g.logID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.shipper.Close)
	return g
}

func (g *replGroup) newReplica(i int, bv *engine.Volume, m Mode, create bool) *Replica {
	t := g.t
	var rep *Replica
	var err error
	buf := g.ends[i].buf.Bytes()
	switch {
	case !create && m == SendIndex:
		br, ok := bv.Backup(7)
		if !ok {
			t.Fatal("backup region missing after restart")
		}
		rep, err = NewSendIndexReplica(bv, br, 3, buf)
	case !create:
		br, ok := bv.Region(7)
		if !ok {
			t.Fatal("backup's region missing after restart")
		}
		rep, err = NewBuildIndexReplica(bv, br, 3, buf)
	case m == SendIndex:
		var br *engine.Backup
		if br, err = bv.CreateBackupRegion(engine.RegionDesc{ID: 7}); err == nil {
			rep, err = NewSendIndexReplica(bv, br, 3, buf)
		}
	default:
		var br *engine.Region
		if br, err = bv.CreateRegion(engine.RegionDesc{ID: 7}); err == nil {
			rep, err = NewBuildIndexReplica(bv, br, 3, buf)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(g.reps) <= i {
		g.reps = append(g.reps, rep)
	} else {
		g.reps[i] = rep
	}
	return rep
}

// write runs writers goroutines of random puts and deletes over nkeys keys
// and returns the final model.
func (g *replGroup) write(rng *rand.Rand, writers, ops, nkeys int) map[string][]byte {
	return g.writeOps(rng, writers, ops, nkeys, func(w, i int, r *rand.Rand, k []byte) ([]byte, error) {
		if r.IntN(6) == 0 {
			return nil, g.pr.Delete(k)
		}
		v := bytes.Repeat(fmt.Appendf(nil, "%d.%d.", w, i), 1+r.IntN(40))
		return v, g.pr.Put(k, v)
	})
}

// writeOps runs writers goroutines of ops operations each over nkeys keys
// and returns the final model. Each writer owns the keys k ≡ w (mod
// writers), so its model is exact; op applies writer w's operation i to
// key k, drawing what else it needs from r, and returns the value the key
// then holds (nil: deleted).
func (g *replGroup) writeOps(rng *rand.Rand, writers, ops, nkeys int, op func(w, i int, r *rand.Rand, k []byte) ([]byte, error)) map[string][]byte {
	seeds := make([]uint64, writers)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	models := make([]map[string][]byte, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seeds[w], 1))
			m := map[string][]byte{}
			for i := range ops {
				k := fmt.Appendf(nil, "k%06d", r.IntN(nkeys/writers)*writers+w)
				v, err := op(w, i, r, k)
				if err != nil {
					errs <- err
					return
				}
				m[string(k)] = v
			}
			models[w] = m
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, m := range models {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// settle waits for the primary's compactions and the backups' commands.
func (g *replGroup) settle() {
	g.t.Helper()
	if err := g.pr.WaitIdle(); err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := g.shipper.Flush(ctx); err != nil { // the tail too: backups hold the whole log
		g.t.Fatal(err)
	}
	for _, r := range g.reps {
		if r.mode == BuildIndex {
			if err := r.Region().WaitIdle(); err != nil {
				g.t.Fatal(err)
			}
		}
	}
}

// copyReader is what the tests read a copy through, in either role
// (engine.Region or engine.Backup).
type copyReader interface {
	Get(key []byte) ([]byte, error)
	Levels() []engine.LevelInfo
	LogSegments() []engine.LogSegment
}

// copyOf is a replica's copy: a Send-Index backup's engine.Backup (until
// a promotion), otherwise its engine.Region.
func copyOf(r *Replica) copyReader {
	if p := r.Region(); p != nil {
		return p
	}
	return r.Backup()
}

// checkContent reads every model key from region r: deleted keys absent,
// others equal. Keys in the part of the log not flushed to a Send-Index
// backup yet are checked separately.
func checkContent(t *testing.T, name string, r copyReader, model map[string][]byte) {
	t.Helper()
	for k, want := range model {
		got, err := r.Get([]byte(k))
		switch {
		case want == nil && !errors.Is(err, engine.ErrNotFound):
			t.Fatalf("%s: deleted key %s: %q, %v", name, k, got, err)
		case want != nil && (err != nil || !bytes.Equal(got, want)):
			t.Fatalf("%s: key %s: %q, %v; want %q", name, k, got, err, want)
		}
	}
}

// checkLevels compares the backup's levels with the primary's.
func checkLevels(t *testing.T, name string, p *engine.Region, b copyReader) {
	t.Helper()
	pl, bl := p.Levels(), b.Levels()
	if len(pl) != len(bl) {
		t.Fatalf("%s: %d levels, primary %d", name, len(bl), len(pl))
	}
	for i := range pl {
		x, y := pl[i], bl[i]
		if x.Height != y.Height || x.Pairs != y.Pairs || x.KVBytes != y.KVBytes || x.Nodes != y.Nodes ||
			len(x.Segments) != len(y.Segments) || (x.Root == 0) != (y.Root == 0) || (x.Root != 0 && x.Root&(mirrorSeg-1) != y.Root&(mirrorSeg-1)) {
			t.Fatalf("%s: L%d differs:\nprimary %+v\nbackup  %+v", name, x.Level, x, y)
		}
	}
}

// TestSendIndexReplication: random writes from 4 goroutines through a
// primary with a tiny L0 (dozens of compactions, GC on): a Send-Index
// backup's levels are structurally the primary's, every key resolves to the
// primary's value through the backup's own log, and the same after
// restarting the backup. (A cluster has one mode: Build-Index backups
// follow a Build-Index stream, buildindex_test.go.)
func TestSendIndexReplication(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 5))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	model := g.write(rng, 4, 1500, 2400)
	if _, err := g.pr.GC(); err != nil {
		t.Fatal(err)
	}
	more := g.write(rng, 4, 500, 2400)
	for k, v := range more {
		model[k] = v
	}
	// Flush L0 to the levels so every key is in a shipped level.
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	st := g.pv.Stats()
	t.Logf("primary: %d compactions, %d level moves, %d log segments freed", st.Compactions, st.LevelMoves, st.GCFreed)
	if st.Compactions < 24 {
		t.Fatalf("only %d compactions ran", st.Compactions)
	}
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("backups dropped: %v", d)
	}
	checkContent(t, "primary", g.pr, model)
	for i, r := range g.reps {
		name := fmt.Sprintf("backup %d (%s)", i, r.mode)
		if r.mode == SendIndex {
			checkLevels(t, name, g.pr, copyOf(r))
		}
		checkContent(t, name, copyOf(r), model)
	}
	// Restart the Send-Index backups: levels and log map come back.
	for i := range 2 {
		if err := g.bvs[i].Close(); err != nil {
			t.Fatal(err)
		}
		bv, err := engine.Open(g.opts(fmt.Sprintf("b%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bv.Close() })
		g.bvs[i] = bv
		br, ok := bv.Backup(7)
		if !ok {
			t.Fatalf("backup %d: no backup region after restart", i)
		}
		checkLevels(t, fmt.Sprintf("restarted backup %d", i), g.pr, br)
		checkContent(t, fmt.Sprintf("restarted backup %d", i), br, model)
	}
	// tebis inspect check's verdict on every volume.
	for i, dir := range []string{"p", "b0", "b1"} {
		in, err := engine.OpenInspector(g.fs, dir, true)
		if err != nil {
			t.Fatal(err)
		}
		rep := in.Check()
		in.Close()
		if len(rep.Problems) != 0 {
			t.Fatalf("volume %d (%s): %d problems, first: %+v", i, dir, len(rep.Problems), rep.Problems[0])
		}
		t.Logf("%s: %d nodes, %d pairs, %d log records checked, %d stale shadowed pointers", dir, rep.Nodes, rep.Pairs, rep.Records, rep.StaleShadowed)
	}
}

// TestBackupDiesMidCompaction: one backup's link fails in the middle of a
// compaction's shipping. The primary drops it (logged), keeps writing and
// compacting, and the other backup stays identical.
func TestBackupDiesMidCompaction(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 6))
	var shipped sync.Map
	fail := map[int]func(*Command) error{1: func(c *Command) error {
		if c.Kind != CmdIndexSegment {
			return nil
		}
		n, _ := shipped.LoadOrStore("n", new(int))
		*n.(*int)++
		if *n.(*int) > 40 {
			return errors.New("backup process died")
		}
		return nil
	}}
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, fail)
	done := make(chan map[string][]byte)
	go func() { done <- g.write(rng, 4, 2000, 2400) }()
	var model map[string][]byte
	select {
	case model = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("writes stalled after a backup died")
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	d := g.shipper.Dropped()
	if len(d) != 1 || d["b1"] == nil {
		t.Fatalf("dropped: %v, want b1", d)
	}
	t.Logf("dropped: %v", d)
	checkLevels(t, "live backup", g.pr, copyOf(g.reps[0]))
	checkContent(t, "live backup", copyOf(g.reps[0]), model)
}

// TestStaleEpochRefused: a replica refuses commands from an older epoch
// and adopts a newer one.
func TestStaleEpochRefused(t *testing.T) {
	fs := vfs.NewMem()
	bv, err := engine.Open(replOpts(fs, 64)("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer bv.Close()
	br, err := bv.CreateBackupRegion(engine.RegionDesc{ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := NewSendIndexReplica(bv, br, 5, make([]byte, 2*mirrorSeg))
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Handle(&Command{Kind: CmdCompactionStart, Region: 7, Epoch: 4, Src: 1, Dst: 2}); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("epoch 4 at 5: %v", err)
	}
	if err := rep.Handle(&Command{Kind: CmdCompactionStart, Region: 7, Epoch: 6, Src: 1, Dst: 2}); err != nil {
		t.Fatal(err)
	}
	if rep.Epoch() != 6 {
		t.Fatalf("epoch %d after a newer command", rep.Epoch())
	}
	if err := rep.Handle(&Command{Kind: CmdCompactionStart, Region: 7, Epoch: 5, Src: 1, Dst: 2}); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("epoch 5 at 6: %v", err)
	}
	if err := rep.Handle(&Command{Kind: CmdCompactionDone, Region: 7, Epoch: 6, Src: 2, Dst: 3}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("done without start: %v", err)
	}
	if err := rep.Handle(&Command{Kind: CmdCompactionStart, Region: 8, Epoch: 6}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("other region: %v", err)
	}
}

// TestMirrorDropStopsCommands: a backup whose mirror connection fails is
// dropped by the mirror, and the shipper stops sending it commands (its
// buffer no longer holds the log, so a flush would persist garbage). Its
// region stays readable: no key reads back corrupt.
func TestMirrorDropStopsCommands(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 7))
	var dropped atomic.Bool
	var after atomic.Int64
	fail := map[int]func(*Command) error{1: func(c *Command) error {
		if dropped.Load() {
			after.Add(1)
		}
		return nil
	}}
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, fail)
	g.write(rng, 4, 300, 2400)
	g.settle()
	g.ends[1].qp.Close() // backup 1's end of the mirror connection fails
	g.write(rng, 4, 200, 2400)
	deadline := time.Now().Add(10 * time.Second)
	for g.shipper.Dropped()["b1"] == nil {
		if time.Now().After(deadline) {
			t.Fatal("the mirror did not drop backup 1")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // the drop reaches the shipper
	dropped.Store(true)
	model := g.write(rng, 4, 1500, 2400)
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	if n := after.Load(); n != 0 {
		t.Fatalf("backup 1 got %d commands after its mirror was dropped", n)
	}
	checkLevels(t, "live backup", g.pr, copyOf(g.reps[0]))
	checkContent(t, "live backup", copyOf(g.reps[0]), model)
	for k := range model {
		if _, err := copyOf(g.reps[1]).Get([]byte(k)); err != nil && !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("dropped backup: key %s: %v", k, err)
		}
	}
}

// TestSendIndexConcurrentGC: the primary's GC frees log segments while
// compactions run and ship (so a shipped segment may name a segment freed
// meanwhile, or hold dead pointers). Once the primary stops, each backup's
// levels have the primary's shapes and its content (levels, then its log
// from the recovery point, as promotion rebuilds it) is the primary's.
func TestSendIndexConcurrentGC(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 8))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil, autoGC)
	model := g.write(rng, 4, 3000, 1600)
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.stopAndCompare(model, g.bvs, "b0", "b1")
	if st := g.pv.Stats(); st.GCFreed == 0 {
		t.Fatal("GC freed no log segment")
	}
}

// stopAndCompare stops the primary (and its GC), lets the backups catch
// up, closes their volumes bvs (dirs), and compares offline: level shapes,
// and content as recovery or a promotion sees it, with the model.
func (g *replGroup) stopAndCompare(model map[string][]byte, bvs []*engine.Volume, dirs ...string) {
	t := g.t
	t.Helper()
	if err := g.pv.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := g.shipper.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := g.pv.Stats()
	t.Logf("primary: %d compactions, %d GC runs, %d log segments freed", st.Compactions, st.GCRuns, st.GCFreed)
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("backups dropped: %v", d)
	}
	for _, bv := range bvs {
		if err := bv.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := levelShapes(t, g.fs, "p")
	checkLogicalContent(t, g.fs, "p", model)
	for _, dir := range dirs {
		if got := levelShapes(t, g.fs, dir); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s levels:\n%v\nprimary:\n%v", dir, got, want)
		}
		checkLogicalContent(t, g.fs, dir, model)
	}
}

// levelShapes describes region 7's levels in a closed volume, without
// segment numbers.
func levelShapes(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	in, err := engine.OpenInspector(fs, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out []string
	for _, ri := range in.Summary().Regions {
		for _, l := range ri.Levels {
			out = append(out, fmt.Sprintf("L%d h%d root+%d nodes %d keys %d bytes %d segs %d",
				l.Level, l.Height, l.Root%mirrorSeg, l.Nodes, l.Pairs, l.KVBytes, len(l.Segments)))
		}
	}
	return out
}

// checkLogicalContent compares a closed volume's region 7 content (levels
// plus the log from the recovery point, as recovery or promotion sees it)
// with the model, and runs check on the volume.
func checkLogicalContent(t *testing.T, fs vfs.FS, dir string, model map[string][]byte) {
	t.Helper()
	in, err := engine.OpenInspector(fs, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	pairs, err := in.Content(7)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	got := map[string][]byte{}
	for _, p := range pairs {
		got[string(p.Key)] = p.Value
	}
	for k, want := range model {
		if v, ok := got[k]; (want == nil) == ok || !bytes.Equal(v, want) {
			t.Fatalf("%s: key %s = %q (present %v), want %q", dir, k, v, ok, want)
		}
	}
	if rep := in.Check(); len(rep.Problems) > 0 {
		t.Fatalf("%s: check: %d problems, first %+v", dir, len(rep.Problems), rep.Problems[0])
	}
}

// TestCheckState: a stream's first command compares the backup with the
// primary; a backup that missed a segment or a compaction refuses it.
func TestCheckState(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 9))
	g := newReplGroup(t, 64, []Mode{SendIndex}, nil)
	g.write(rng, 2, 1500, 1000)
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	check := func(st replwire.State) error {
		d, err := replwire.DecodeState(st.Encode())
		if err != nil {
			t.Fatal(err)
		}
		return g.reps[0].Handle(&Command{Kind: CmdCheck, Region: 7, Epoch: 3, Data: d.Encode()})
	}
	st := primaryState(g.pr)
	if len(st.Logs) < 2 || len(st.Levels) == 0 {
		t.Fatalf("state too small to test: %d logs, %d levels", len(st.Logs), len(st.Levels))
	}
	if err := check(st); err != nil {
		t.Fatalf("in-sync backup: %v", err)
	}
	hole := st
	hole.Logs = append([]engine.LogSegment{{Segment: 999, Seq: 12345, End: 60000}}, st.Logs...)
	if err := check(hole); !errors.Is(err, ErrOutOfSync) {
		t.Fatalf("a sealed segment missing before adopted ones: %v", err)
	}
	// Missing after the last adopted one: repairable, the primary sends it.
	behind := st
	behind.Logs = append(append([]engine.LogSegment(nil), st.Logs...), engine.LogSegment{Segment: 999, Seq: 12345, End: 60000})
	if err := check(behind); err != nil {
		t.Fatalf("a backup behind by a sealed segment: %v", err)
	}
	gaps, err := catchUp(behind.Logs, backupLogs(g.reps[0].Backup()))
	if err != nil || len(gaps) != 1 || gaps[0] != (gap{Segment: 999, Seq: 12345, From: engine.SegmentHeaderSize, End: 60000}) {
		t.Fatalf("catch-up of a backup behind: %+v %v", gaps, err)
	}
	gone := st
	gone.Logs = st.Logs[1:]
	if err := check(gone); !errors.Is(err, ErrOutOfSync) {
		t.Fatalf("a segment the primary freed: %v", err)
	}
	lv := st
	lv.Levels = append([]replwire.Level(nil), st.Levels...)
	for i := range lv.Levels {
		if lv.Levels[i].Root != 0 {
			lv.Levels[i].Pairs++
			break
		}
	}
	if err := check(lv); !errors.Is(err, ErrOutOfSync) {
		t.Fatalf("a level of another shape: %v", err)
	}
	if _, err := replwire.DecodeState([]byte{1, 0, 0, 0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short state: %v", err)
	}
}

// TestCompactionOfEmptyTail: after a crash the primary's tail is an empty
// segment prepared before it (a clean close frees the prepared segments),
// so its first L0 compaction's recovery point is that segment's first
// byte. The backups still adopt the segment, and the recovery point
// translates.
func TestCompactionOfEmptyTail(t *testing.T) {
	mem := vfs.NewCrashableMem()
	opts := replOpts(mem, 1000)
	pv, err := engine.Open(opts("p"))
	if err != nil {
		t.Fatal(err)
	}
	pr, err := pv.CreateRegion(engine.RegionDesc{ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Past half a segment the next one is prepared (in the metadata).
	for i := range 250 {
		if err := pr.Put(fmt.Appendf(nil, "k%06d", i), bytes.Repeat([]byte{'v'}, 200)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // the preparer runs in the background
	if err := pr.Sync(); err != nil { // the records are durable: only a prepared tail is empty
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := pv.Close(); err != nil {
		t.Fatal(err)
	}
	opts = replOpts(crashed, 1000)
	po := opts("p")
	po.HoldBackground = true
	if pv, err = engine.Open(po); err != nil {
		t.Fatal(err)
	}
	defer pv.Close()
	pr, _ = pv.Region(7)
	tail, err := pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	if tail.Offset != engine.SegmentHeaderSize {
		t.Fatalf("the recovered tail is at %d, want an empty prepared segment", tail.Offset)
	}
	bv, err := engine.Open(opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer bv.Close()
	br, err := bv.CreateBackupRegion(engine.RegionDesc{ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("et%d", loopAddrs) }, 1)
	rep, err := NewSendIndexReplica(bv, br, 1, ends[0].buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMirror(mirrorSeg, tail.Segment, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sh, err := startShipper(ShipperConfig{Region: pr, Epoch: 1, Mode: SendIndex, SegSize: mirrorSeg, Mirror: m,
		Links: map[string]Link{bs[0].Name: &LocalLink{Replica: rep}}, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	pr.Resume()
	if err := pr.Compact(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := sh.Dropped(); len(d) != 0 {
		t.Fatalf("dropped: %v", d)
	}
	checkLevels(t, "backup", pr, br)
}
