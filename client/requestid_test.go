package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
)

func TestSeqTrackerAck(t *testing.T) {
	s := newSeqTracker()
	steps := []struct {
		begin   bool
		seq     uint64 // begin: the seq expected; end: the seq ended
		wantAck uint64
	}{
		{true, 1, 1}, {true, 2, 1}, {true, 3, 1},
		{false, 2, 1}, // out of order: 1 still in progress
		{false, 1, 3}, // 1 and 2 complete
		{true, 4, 3},
		{false, 3, 4},
		{false, 4, 5}, // nothing in progress: the next seq
	}
	for i, st := range steps {
		if st.begin {
			if got, ack := s.begin(); got != st.seq || ack != st.wantAck {
				t.Fatalf("step %d: begin = %d, ack %d, want %d, %d", i, got, ack, st.seq, st.wantAck)
			}
		} else {
			s.end(st.seq)
		}
		if got := s.ack(); got != st.wantAck {
			t.Fatalf("step %d: ack = %d, want %d", i, got, st.wantAck)
		}
	}
}

// TestSeqTrackerAckModel drives the tracker with random begins and ends
// (any order; a seq ended twice, or not begun yet) and checks every ack
// against the seqs in progress. The writes in progress stay few, as
// under a client's concurrency, so the lowest of them changes often.
func TestSeqTrackerAckModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	s := newSeqTracker()
	var inProgress []uint64 // ascending
	var next uint64 = 1
	for step := range 20000 {
		switch r := rng.IntN(10); {
		case len(inProgress) == 0 || (r < 5 && len(inProgress) < 24):
			got, ack := s.begin()
			if got != next {
				t.Fatalf("step %d: begin = %d, want %d", step, got, next)
			}
			inProgress = append(inProgress, next)
			if ack != inProgress[0] {
				t.Fatalf("step %d: begin's ack %d, want the lowest in progress %d", step, ack, inProgress[0])
			}
			next++
		case r < 9:
			i := rng.IntN(len(inProgress))
			s.end(inProgress[i])
			inProgress = slices.Delete(inProgress, i, i+1)
		default:
			// Ended already, or not begun yet: nothing changes.
			if q := uint64(rng.IntN(int(next) + 2)); !slices.Contains(inProgress, q) {
				s.end(q)
			}
		}
		want := next
		if len(inProgress) > 0 {
			want = inProgress[0]
		}
		if got := s.ack(); got != want {
			t.Fatalf("step %d: ack = %d, want %d (%d in progress)", step, got, want, len(inProgress))
		}
	}
}

// TestSeqTrackerConcurrent: writers begin and end seqs at once; an ack
// read while a write is in progress is never above that write's seq.
func TestSeqTrackerConcurrent(t *testing.T) {
	s := newSeqTracker()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				seq, first := s.begin()
				if ack := s.ack(); ack > seq || first > seq {
					bad.Add(1)
				}
				s.end(seq)
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d acks above a write in progress", n)
	}
	if got, want := s.ack(), uint64(8*2000+1); got != want {
		t.Fatalf("ack with nothing in progress: %d, want %d", got, want)
	}
}

func TestRetryWindowBelowRequestRetention(t *testing.T) {
	if MaxRetryWindow >= engine.DefaultRequestRetention {
		t.Fatalf("MaxRetryWindow %v must be below the regions' request retention %v", MaxRetryWindow, engine.DefaultRequestRetention)
	}
	m := regionmap.Single(regionmap.Server{Name: "s", TCP: "127.0.0.1:1"})
	for _, w := range []time.Duration{-time.Second, MaxRetryWindow + time.Millisecond} {
		if _, err := Open(context.Background(), Config{Map: regionmap.Static{M: m}, RetryWindow: w}); err == nil {
			t.Fatalf("RetryWindow %v accepted", w)
		}
	}
}

// TestWriteRetriesKeepIdentityWithinWindow: a server that answers every
// write UNAVAILABLE sees each attempt of one write with the same identity,
// and no attempt after the retry window; the next write has the next seq
// and acknowledges the first.
func TestWriteRetriesKeepIdentityWithinWindow(t *testing.T) {
	var mu sync.Mutex
	var puts []wire.RequestID
	var dels []wire.RequestID
	var last time.Time
	unavailable := ring.Reply{Status: wire.StatusUnavailable, Payload: []byte("injected")}
	srv, err := ring.Listen(ring.ServerConfig{Transport: &rdma.TCP{}, Addr: "127.0.0.1:0", Handlers: map[uint16]ring.HandlerFunc{
		wire.TypePut: func(req *ring.ServerRequest) ring.Reply {
			q, err := wire.DecodePutRequest(req.Payload)
			if err != nil || string(q.Key) != "k" || string(q.Value) != "v" {
				t.Errorf("put: key %q value %q, %v; want k, v (every attempt)", q.Key, q.Value, err)
			}
			mu.Lock()
			puts, last = append(puts, q.ID), time.Now()
			mu.Unlock()
			return unavailable
		},
		wire.TypeDelete: func(req *ring.ServerRequest) ring.Reply {
			q, err := wire.DecodeDeleteRequest(req.Payload)
			if err != nil {
				t.Errorf("delete: %v", err)
			}
			mu.Lock()
			dels = append(dels, q.ID)
			mu.Unlock()
			return ring.Reply{}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	m := regionmap.Single(regionmap.Server{Name: "s", TCP: srv.Addr()})
	const window = 300 * time.Millisecond
	c, err := Open(context.Background(), Config{Map: regionmap.Static{M: m}, RetryWindow: window, Retries: 1000, ClientID: 77})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	err = c.Put(context.Background(), []byte("k"), []byte("v"))
	putErr := err
	if err == nil {
		t.Fatal("put succeeded against a server that only answers UNAVAILABLE")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(puts) < 3 {
		t.Fatalf("%d attempts in the window, want several", len(puts))
	}
	for i, id := range puts {
		if id != (wire.RequestID{Client: 77, Seq: 1, Ack: 1}) {
			t.Fatalf("attempt %d carries %+v", i, id)
		}
	}
	if late := last.Sub(start); late > window {
		t.Fatalf("an attempt %v after the first, past the %v window", late, window)
	}
	mu.Unlock()
	t0 := time.Now()
	if err := c.Delete(context.Background(), []byte("k")); err != nil {
		t.Fatalf("delete after %v (the put: %v): %v", time.Since(t0), putErr, err)
	}
	mu.Lock()
	if len(dels) != 1 || dels[0] != (wire.RequestID{Client: 77, Seq: 2, Ack: 2}) {
		t.Fatalf("delete carried %+v, want client 77 seq 2 ack 2", dels)
	}
	mu.Unlock()
	if !errors.Is(putErr, ErrUnavailable) {
		t.Fatalf("put after the window: %v, want ErrUnavailable", putErr)
	}
	mu.Lock()
}

// TestWriteHungAttemptEndsAtWindow: a write whose first attempt is never
// answered (a hung server) fails with ErrUnavailable once the retry window
// has passed, not when the caller's context ends, also once the hung
// writes' reply slots fill the connection's rings and a write waits for
// room; the client's next write, to a server that answers, succeeds.
func TestWriteHungAttemptEndsAtWindow(t *testing.T) {
	release := make(chan struct{})
	var hang atomic.Bool
	hang.Store(true)
	srv, err := ring.Listen(ring.ServerConfig{Transport: &rdma.TCP{}, Addr: "127.0.0.1:0", Handlers: map[uint16]ring.HandlerFunc{
		wire.TypePut: func(req *ring.ServerRequest) ring.Reply {
			if hang.Load() {
				<-release
			}
			return ring.Reply{}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	stop := sync.OnceFunc(func() { close(release) })
	defer stop()
	m := regionmap.Single(regionmap.Server{Name: "s", TCP: srv.Addr()})
	const window = 200 * time.Millisecond
	// Small rings: the hung puts' reply slots fill them, and the later
	// puts wait for room, which the window bounds too.
	c, err := Open(context.Background(), Config{Map: regionmap.Static{M: m}, RetryWindow: window, RingSize: ring.MinRing, ReplyHint: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 8 {
		start := time.Now()
		err := c.Put(context.Background(), []byte("k"), []byte("v"))
		took := time.Since(start)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "retry window") {
			t.Fatalf("hung put %d: %v, want ErrUnavailable past the retry window", i, err)
		}
		if took < window || took > window+2*time.Second {
			t.Fatalf("hung put %d returned after %v, want about the %v window", i, took, window)
		}
	}
	// The hung attempts' reply slots hold the connection's reply ring
	// (reserved in order) until they are answered.
	hang.Store(false)
	stop()
	for i := range 200 {
		if err := c.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
			t.Fatalf("put %d to an answering server: %v", i, err)
		}
	}
}

// BenchmarkSeqTracker is one write's bookkeeping (begin with the ack its
// first attempt carries, end) from parallel writers.
func BenchmarkSeqTracker(b *testing.B) {
	s := newSeqTracker()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			seq, _ := s.begin()
			s.end(seq)
		}
	})
}
