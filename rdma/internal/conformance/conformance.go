// Package conformance is the test suite every rdma transport must pass,
// unchanged: ordering, WRITE sizes, last-word visibility, access checks,
// doorbells, peer death and many concurrent queue pairs.
package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/rdma"
)

// Env is what the suite needs of a transport: the transport and a fresh
// listen address per call.
type Env struct {
	Transport rdma.Transport
	Addr      func(t *testing.T) string
	// DeadWithin bounds how long peer death may take to show.
	DeadWithin time.Duration
	// ViewHoldsWrites: the transport's WRITEs copy in this process, so
	// MR.View excludes them (loopback, tcp; not shm).
	ViewHoldsWrites bool
	// CompletesOnPost: the transport's QPs say so (rdma.Immediate).
	CompletesOnPost bool
}

// Run runs the suite.
func Run(t *testing.T, env Env) {
	tests := []struct {
		name string
		fn   func(*testing.T, Env)
	}{
		{"Basic", testBasic},
		{"Sizes", testSizes},
		{"Ordering", testOrdering},
		{"LastWordLast", testLastWordLast},
		{"AccessViolations", testAccess},
		{"LocalAccess", testLocalAccess},
		{"Doorbell", testDoorbell},
		{"PeerClose", testPeerClose},
		{"PeerSevered", testPeerSevered},
		{"ZeroLengthProbe", testZeroLengthProbe},
		{"Reject", testReject},
		{"ManyQPs", testManyQPs},
		{"DeregisterDuringWrites", testDeregisterDuringWrites},
		{"LongStream", testLongStream},
		{"View", testView},
		{"CompletesOnPost", testCompletesOnPost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, env) })
	}
}

// pair is a connected pair: a (the dialer) writes into b's region.
type pair struct {
	a, b     rdma.QP
	acq, bcq *rdma.CQ
	amr, bmr *rdma.MR
}

func register(t *testing.T, n int) *rdma.MR {
	t.Helper()
	mr, err := rdma.Register(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mr.Deregister() })
	return mr
}

func connect(t *testing.T, env Env, aSize, bSize int) *pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := env.Addr(t)
	ln, err := env.Transport.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := &pair{acq: rdma.NewCQ(), bcq: rdma.NewCQ(), amr: register(t, aSize), bmr: register(t, bSize)}
	type res struct {
		qp  rdma.QP
		err error
	}
	ch := make(chan res, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			ch <- res{err: err}
			return
		}
		if string(req.Private()) != "hello from a" || len(req.PeerRegions()) != 1 {
			ch <- res{err: fmt.Errorf("request private %q, %d regions", req.Private(), len(req.PeerRegions()))}
			req.Reject()
			return
		}
		qp, err := req.Accept(rdma.ConnConfig{CQ: p.bcq, Expose: []*rdma.MR{p.bmr}, Private: []byte("hello from b")})
		ch <- res{qp, err}
	}()
	p.a, err = env.Transport.Dial(ctx, ln.Addr(), rdma.ConnConfig{CQ: p.acq, Expose: []*rdma.MR{p.amr}, Private: []byte("hello from a")})
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	p.b = r.qp
	t.Cleanup(func() { p.a.Close(); p.b.Close() })
	if string(p.a.PeerPrivate()) != "hello from b" {
		t.Fatalf("dialer got private %q", p.a.PeerPrivate())
	}
	if got := p.a.PeerRegions(); len(got) != 1 || got[0] != p.bmr.Remote() {
		t.Fatalf("dialer got regions %+v, want %+v", got, p.bmr.Remote())
	}
	if got := p.b.PeerRegions(); len(got) != 1 || got[0] != p.amr.Remote() {
		t.Fatalf("listener got regions %+v, want %+v", got, p.amr.Remote())
	}
	return p
}

// wait returns the next completion of cq or fails after d.
func wait(t *testing.T, cq *rdma.CQ, d time.Duration) rdma.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var c [1]rdma.Completion
	if _, err := cq.Wait(ctx, c[:]); err != nil {
		t.Fatalf("no completion within %v: %v", d, err)
	}
	return c[0]
}

// write posts a signaled WRITE and waits for its completion.
func write(t *testing.T, p *pair, id uint64, loff, n int, r rdma.RemoteMR, roff uint64) error {
	t.Helper()
	if err := p.a.PostWrite(rdma.WriteWR{ID: id, Local: p.amr, LocalOff: loff, Len: n, Remote: r, RemoteOff: roff, Signaled: true}); err != nil {
		t.Fatalf("post: %v", err)
	}
	c := wait(t, p.acq, 10*time.Second)
	if c.Op != rdma.OpWrite || c.WRID != id {
		t.Fatalf("completion %+v, want write %d", c, id)
	}
	return c.Err
}

func testBasic(t *testing.T, env Env) {
	p := connect(t, env, 4096, 4096)
	copy(p.amr.Bytes(), "one-sided")
	if err := write(t, p, 7, 0, 9, p.a.PeerRegions()[0], 100); err != nil {
		t.Fatal(err)
	}
	if got := string(p.bmr.Bytes()[100:109]); got != "one-sided" {
		t.Fatalf("target holds %q", got)
	}
	if n := p.bcq.Poll(make([]rdma.Completion, 4)); n != 0 {
		t.Fatalf("the target's CQ got %d completions for a WRITE", n)
	}
}

func testSizes(t *testing.T, env Env) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 1))
	const size = 2 << 20
	p := connect(t, env, size, size)
	for i, n := range []int{0, 1, 7, 8, 9, 63, 64, 4096, 65536, 1 << 20, size} {
		src := p.amr.Bytes()[:n]
		for j := range src {
			src[j] = byte(rng.Uint32())
		}
		off := uint64(0)
		if n < size {
			off = uint64(rng.IntN(size - n))
		}
		if err := write(t, p, uint64(i), 0, n, p.a.PeerRegions()[0], off); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(p.bmr.Bytes()[off:off+uint64(n)], src) {
			t.Fatalf("%d bytes at %d: target differs", n, off)
		}
	}
}

// testOrdering: WRITE i stores i+1 into word i; a poller that sees word i
// set must see every earlier word set.
func testOrdering(t *testing.T, env Env) {
	const n = 20000
	p := connect(t, env, 8*n, 8*n)
	src := p.amr.Bytes()
	for i := range n {
		rdma.StoreWord(src, 8*i, uint64(i+1))
	}
	errc := make(chan error, 1)
	go func() {
		dst := p.bmr.Bytes()
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; i < n; {
			if rdma.LoadWord(dst, 8*i) != uint64(i+1) {
				if time.Now().After(deadline) {
					errc <- fmt.Errorf("word %d never arrived", i)
					return
				}
				continue
			}
			for j := i - 1; j >= 0 && j >= i-64; j-- {
				if rdma.LoadWord(dst, 8*j) != uint64(j+1) {
					errc <- fmt.Errorf("word %d visible before word %d", i, j)
					return
				}
			}
			i++
		}
		errc <- nil
	}()
	r := p.a.PeerRegions()[0]
	for i := range n {
		wr := rdma.WriteWR{ID: uint64(i), Local: p.amr, LocalOff: 8 * i, Len: 8, Remote: r, RemoteOff: uint64(8 * i), Signaled: i == n-1}
		if err := p.a.PostWrite(wr); err != nil {
			t.Fatal(err)
		}
	}
	if c := wait(t, p.acq, 30*time.Second); c.Err != nil || c.WRID != n-1 {
		t.Fatalf("completion %+v", c)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// testLastWordLast: a poller that sees a message's last word sees all of it.
func testLastWordLast(t *testing.T, env Env) {
	const msg, rounds = 64 << 10, 200
	p := connect(t, env, msg, msg)
	errc := make(chan error, 1)
	go func() {
		// The writer may be rounds ahead; what must never happen is a
		// byte older than the last word seen before it.
		dst := p.bmr.Bytes()
		deadline := time.Now().Add(60 * time.Second)
		for {
			w := rdma.LoadWord(dst, msg-8)
			for i := 0; w > 0 && i < msg-8; i += 512 {
				if dst[i] < byte(w) {
					errc <- fmt.Errorf("round %d: byte %d is from round %d after the last word", w, i, dst[i])
					return
				}
			}
			if w == rounds {
				errc <- nil
				return
			}
			if time.Now().After(deadline) {
				errc <- fmt.Errorf("round %d never arrived", rounds)
				return
			}
		}
	}()
	src := p.amr.Bytes()
	r := p.a.PeerRegions()[0]
	for round := 1; round <= rounds; round++ {
		for i := 0; i < msg-8; i++ {
			src[i] = byte(round)
		}
		rdma.StoreWord(src, msg-8, uint64(round))
		// Signaled, and waited for: the source is reused next round.
		if err := write(t, p, uint64(round), 0, msg, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func testAccess(t *testing.T, env Env) {
	p := connect(t, env, 4096, 4096)
	for i := range p.amr.Bytes() {
		p.amr.Bytes()[i] = 0xAB
	}
	good := p.a.PeerRegions()[0]
	wrongKey := good
	wrongKey.Key ^= 0x5555
	unknown := good
	unknown.Addr += 1 << 40
	cases := []struct {
		name string
		r    rdma.RemoteMR
		off  uint64
		n    int
	}{
		{"wrong key", wrongKey, 0, 16},
		{"unknown region", unknown, 0, 16},
		{"past the end", good, 4090, 16},
		{"offset past the end", good, 1 << 40, 1},
		{"offset wraps", good, ^uint64(0) - 3, 8},
	}
	for i, tc := range cases {
		err := write(t, p, uint64(i), 0, tc.n, tc.r, tc.off)
		if !errors.Is(err, rdma.ErrAccess) {
			t.Fatalf("%s: completion error %v, want ErrAccess", tc.name, err)
		}
		if !bytes.Equal(p.bmr.Bytes(), make([]byte, 4096)) {
			t.Fatalf("%s: target touched", tc.name)
		}
	}
	// Unsignaled failures complete too.
	if err := p.a.PostWrite(rdma.WriteWR{ID: 99, Local: p.amr, Len: 8, Remote: wrongKey}); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, p.acq, 10*time.Second); c.WRID != 99 || !errors.Is(c.Err, rdma.ErrAccess) {
		t.Fatalf("unsignaled bad WRITE completed as %+v", c)
	}
	// The QP stays usable.
	if err := write(t, p, 100, 0, 16, good, 0); err != nil {
		t.Fatalf("after access errors: %v", err)
	}
	// A deregistered region refuses WRITEs.
	extra := register(t, 4096)
	_ = extra
	if err := p.bmr.Deregister(); err != nil {
		t.Fatal(err)
	}
	if err := write(t, p, 101, 0, 16, good, 0); !errors.Is(err, rdma.ErrAccess) {
		t.Fatalf("WRITE into a deregistered region: %v, want ErrAccess", err)
	}
}

func testLocalAccess(t *testing.T, env Env) {
	p := connect(t, env, 4096, 4096)
	r := p.a.PeerRegions()[0]
	for _, wr := range []rdma.WriteWR{
		{Local: p.amr, LocalOff: 4000, Len: 100, Remote: r},
		{Local: p.amr, LocalOff: -1, Len: 1, Remote: r},
		{Local: nil, Len: 1, Remote: r},
	} {
		if err := p.a.PostWrite(wr); !errors.Is(err, rdma.ErrLocalAccess) {
			t.Fatalf("post %+v: %v, want ErrLocalAccess", wr, err)
		}
	}
}

func testDoorbell(t *testing.T, env Env) {
	p := connect(t, env, 4096, 4096)
	r := p.a.PeerRegions()[0]
	post := func(id uint64, imm uint32) {
		t.Helper()
		if err := write(t, p, id, 0, 8, r, 0); err != nil {
			t.Fatal(err)
		}
		_ = imm
	}
	solicited := func(id uint64, imm uint32) {
		t.Helper()
		if err := p.a.PostWrite(rdma.WriteWR{ID: id, Local: p.amr, Len: 8, Remote: r, Signaled: true, Solicited: true, Imm: imm}); err != nil {
			t.Fatal(err)
		}
		if c := wait(t, p.acq, 10*time.Second); c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	// Not armed: no doorbell.
	solicited(1, 11)
	// Armed: one doorbell, for the first solicited WRITE only.
	p.b.ReqNotify()
	post(2, 0) // not solicited
	solicited(3, 33)
	solicited(4, 44)
	c := wait(t, p.bcq, 10*time.Second)
	if c.Op != rdma.OpDoorbell || c.Imm != 33 || c.QP != p.b {
		t.Fatalf("doorbell %+v, want imm 33 on b", c)
	}
	time.Sleep(50 * time.Millisecond)
	if n := p.bcq.Poll(make([]rdma.Completion, 4)); n != 0 {
		t.Fatalf("%d more completions after one armed doorbell", n)
	}
}

// testPeerClose: a peer's Close shows as ErrPeerGone, never as
// ErrPeerLost (a death), even with WRITEs of its own just queued.
func testPeerClose(t *testing.T, env Env) {
	checkPeerEnd(t, env, func(qp rdma.QP) { qp.Close() }, false)
}

// testPeerSevered: a connection severed as a death would sever it shows
// as ErrPeerLost.
func testPeerSevered(t *testing.T, env Env) {
	checkPeerEnd(t, env, rdma.Sever, true)
}

// testZeroLengthProbe: a signaled WRITE of no bytes completes once the
// WRITEs before it did, while the target's key is valid, and fails with
// ErrAccess once the target revoked it (a primary's read probe).
func testZeroLengthProbe(t *testing.T, env Env) {
	p := connect(t, env, 4096, 4096)
	r := p.a.PeerRegions()[0]
	copy(p.amr.Bytes(), "probe-ok")
	if err := p.a.PostWrite(rdma.WriteWR{ID: 1, Local: p.amr, Len: 8, Remote: r}); err != nil {
		t.Fatal(err)
	}
	if err := p.a.PostWrite(rdma.WriteWR{ID: 2, Local: p.amr, Len: 0, Remote: r, Signaled: true}); err != nil {
		t.Fatal(err)
	}
	c := wait(t, p.acq, 10*time.Second)
	if c.Op != rdma.OpWrite || c.WRID != 2 || c.Err != nil {
		t.Fatalf("probe completion %+v, want WRID 2 without error", c)
	}
	if got := string(p.bmr.Bytes()[:8]); got != "probe-ok" {
		t.Fatalf("WRITE before the probe not landed when it completed: %q", got)
	}
	p.bmr.Revoke()
	if err := p.a.PostWrite(rdma.WriteWR{ID: 3, Local: p.amr, Len: 0, Remote: r, Signaled: true}); err != nil {
		t.Fatal(err)
	}
	c = wait(t, p.acq, 10*time.Second)
	if c.Op != rdma.OpWrite || c.WRID != 3 || !errors.Is(c.Err, rdma.ErrAccess) {
		t.Fatalf("probe of a revoked region %+v, want ErrAccess", c)
	}
}

// testCompletesOnPost: a QP claims rdma.Immediate exactly where the
// environment says, and one that does has every signaled WRITE's bytes
// in the peer's memory and its completion on the CQ when PostWrite
// returns.
func testCompletesOnPost(t *testing.T, env Env) {
	p := connect(t, env, 4096, 4096)
	im, ok := p.a.(rdma.Immediate)
	if claims := ok && im.CompletesOnPost(); claims != env.CompletesOnPost {
		t.Fatalf("CompletesOnPost %v, want %v", claims, env.CompletesOnPost)
	}
	if !env.CompletesOnPost {
		return
	}
	r := p.a.PeerRegions()[0]
	var cs [4]rdma.Completion
	for i := range 100 {
		msg := fmt.Appendf(nil, "write-%03d", i)
		copy(p.amr.Bytes(), msg)
		if err := p.a.PostWrite(rdma.WriteWR{ID: uint64(i), Local: p.amr, Len: len(msg), Remote: r, Signaled: true}); err != nil {
			t.Fatal(err)
		}
		if n := p.acq.Poll(cs[:]); n != 1 || cs[0].WRID != uint64(i) || cs[0].Err != nil {
			t.Fatalf("WRITE %d: %d completions queued at its return (%+v), want its own", i, n, cs[:n])
		}
		if got := string(p.bmr.Bytes()[:len(msg)]); got != string(msg) {
			t.Fatalf("WRITE %d: the peer holds %q at its return", i, got)
		}
	}
}

func checkPeerEnd(t *testing.T, env Env, end func(rdma.QP), lost bool) {
	p := connect(t, env, 4096, 4096)
	r := p.a.PeerRegions()[0]
	if err := p.b.PostWrite(rdma.WriteWR{Local: p.bmr, Len: 8, Remote: p.b.PeerRegions()[0]}); err != nil {
		t.Fatal(err)
	}
	end(p.b)
	start := time.Now()
	deadline := start.Add(env.DeadWithin + 5*time.Second)
	for {
		c := wait(t, p.acq, env.DeadWithin+5*time.Second)
		if c.Op == rdma.OpDisconnect {
			if !errors.Is(c.Err, rdma.ErrPeerGone) || errors.Is(c.Err, rdma.ErrPeerLost) != lost {
				t.Fatalf("disconnect error %v, want ErrPeerGone, lost %v", c.Err, lost)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no disconnect completion")
		}
	}
	if d := time.Since(start); d > env.DeadWithin {
		t.Fatalf("peer close took %v to show, bound %v", d, env.DeadWithin)
	}
	if err := p.a.PostWrite(rdma.WriteWR{Local: p.amr, Len: 8, Remote: r, Signaled: true}); err == nil {
		t.Fatal("post after peer close succeeded")
	}
	if p.a.Err() == nil {
		t.Fatal("QP not broken after peer close")
	}
}

func testReject(t *testing.T, env Env) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := env.Transport.Listen(env.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if req, err := ln.Accept(ctx); err == nil {
			req.Reject()
		}
	}()
	_, err = env.Transport.Dial(ctx, ln.Addr(), rdma.ConnConfig{CQ: rdma.NewCQ()})
	if !errors.Is(err, rdma.ErrRejected) {
		t.Fatalf("dial: %v, want ErrRejected", err)
	}
	if _, err := env.Transport.Dial(ctx, ln.Addr(), rdma.ConnConfig{}); err == nil {
		t.Fatal("dial without a CQ succeeded")
	}
}

// testManyQPs: many pairs, each with a writer goroutine, one shared CQ per
// side.
func testManyQPs(t *testing.T, env Env) {
	const qps, writes = 24, 300
	var wg sync.WaitGroup
	pairs := make([]*pair, qps)
	for i := range pairs {
		pairs[i] = connect(t, env, 8*writes, 8*writes)
	}
	errs := make(chan error, qps)
	for i, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := p.amr.Bytes()
			r := p.a.PeerRegions()[0]
			for w := range writes {
				rdma.StoreWord(src, 8*w, uint64(i)<<32|uint64(w+1))
				if err := p.a.PostWrite(rdma.WriteWR{ID: uint64(w), Local: p.amr, LocalOff: 8 * w, Len: 8, Remote: r, RemoteOff: uint64(8 * w), Signaled: w%50 == 49}); err != nil {
					errs <- err
					return
				}
			}
			for range writes / 50 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				var c [1]rdma.Completion
				_, err := p.acq.Wait(ctx, c[:])
				cancel()
				if err == nil {
					err = c[0].Err
				}
				if err != nil {
					errs <- err
					return
				}
			}
			dst := p.bmr.Bytes()
			for w := range writes {
				if got := rdma.LoadWord(dst, 8*w); got != uint64(i)<<32|uint64(w+1) {
					errs <- fmt.Errorf("qp %d word %d = %#x", i, w, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// testDeregisterDuringWrites: regions deregistered while WRITEs stream
// into and out of them: no crash, and the WRITEs after fail cleanly.
func testDeregisterDuringWrites(t *testing.T, env Env) {
	const size = 4 << 20
	p := connect(t, env, size, size)
	r := p.a.PeerRegions()[0]
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			err := p.a.PostWrite(rdma.WriteWR{ID: uint64(i), Local: p.amr, Len: size, Remote: r})
			if err != nil {
				done <- nil // the source was deregistered: ErrLocalAccess
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if err := p.bmr.Deregister(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := p.amr.Deregister(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("writer never saw its region deregistered")
	}
}

// testLongStream: a peer streaming WRITEs without pause for several
// dead-peer timeouts is alive, and its signaled WRITEs complete.
func testLongStream(t *testing.T, env Env) {
	const size = 64 << 10
	p := connect(t, env, size, size)
	r := p.a.PeerRegions()[0]
	end := time.Now().Add(env.DeadWithin * 3)
	for i := 0; time.Now().Before(end); i++ {
		if err := p.a.PostWrite(rdma.WriteWR{ID: uint64(i), Local: p.amr, Len: size, Remote: r, Signaled: i%64 == 63}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		for {
			var c [4]rdma.Completion
			n := p.acq.Poll(c[:])
			if n == 0 {
				break
			}
			for _, e := range c[:n] {
				if e.Err != nil || e.Op != rdma.OpWrite {
					t.Fatalf("completion %+v during a stream", e)
				}
			}
		}
	}
	if p.a.Err() != nil || p.b.Err() != nil {
		t.Fatalf("QP broke during a stream: %v / %v", p.a.Err(), p.b.Err())
	}
}

// testView: MR.View shows completed WRITEs and, where the transport's
// copies run in this process, never a WRITE half copied (every snapshot
// holds one WRITE's byte throughout); after Deregister it calls nothing.
func testView(t *testing.T, env Env) {
	const size = 64 << 10
	p := connect(t, env, size, size)
	r := p.a.PeerRegions()[0]
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			b := p.amr.Bytes()
			for j := range b {
				b[j] = byte(i)
			}
			if err := p.a.PostWrite(rdma.WriteWR{ID: uint64(i), Local: p.amr, Len: size, Remote: r, Signaled: true}); err != nil {
				done <- err
				return
			}
			c := wait(t, p.acq, 10*time.Second)
			if c.Err != nil {
				done <- c.Err
				return
			}
		}
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	views := 0
	for time.Now().Before(deadline) {
		ok := p.bmr.View(func(b []byte) {
			views++
			if !env.ViewHoldsWrites {
				return
			}
			for j := range b {
				if b[j] != b[0] {
					t.Errorf("view %d: byte %d is %d, byte 0 is %d: a WRITE was copying", views, j, b[j], b[0])
					return
				}
			}
		})
		if !ok {
			t.Fatal("View refused a registered region")
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	copy(p.amr.Bytes(), "last")
	if err := write(t, p, 0, 0, 4, r, 0); err != nil {
		t.Fatal(err)
	}
	p.bmr.View(func(b []byte) {
		if string(b[:4]) != "last" {
			t.Errorf("view after a completed WRITE holds %q", b[:4])
		}
	})
	if err := p.bmr.Deregister(); err != nil {
		t.Fatal(err)
	}
	if p.bmr.View(func([]byte) { t.Error("View called fn on a deregistered region") }) {
		t.Error("View returned true on a deregistered region")
	}
}
