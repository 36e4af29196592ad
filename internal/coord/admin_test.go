package coord

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

func TestParseRequests(t *testing.T) {
	got := parseRequests([]string{"move-3-rs-b", "move-3-rs-a", "move-4-x", "drain-rs-c", "rebalance",
		"move--x", "move-0-x", "move-5-", "move-y-x", "drain-", "other"})
	want := Requests{Moves: map[uint64]string{3: "rs-b", 4: "x"}, Drained: map[string]bool{"rs-c": true}, Rebalance: true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %+v, want %+v", got, want)
	}
}

// TestRequests: requests written by one session reach another's watch,
// a move replaces the region's earlier one, and finishing deletes them.
func TestRequests(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	w, s := dial(t, addr, 0), dial(t, addr, 0)
	ctx := ctxFor(t, 30*time.Second)
	var mu sync.Mutex
	var cur Requests
	wctx, stop := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		w.WatchRequests(wctx, func(rq Requests) {
			mu.Lock()
			cur = rq
			mu.Unlock()
		})
	}()
	defer func() { stop(); <-watchDone }()
	is := func(want Requests) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return reflect.DeepEqual(cur, want)
		}
	}
	for _, err := range []error{s.RequestMove(ctx, 7, "rs-z"), s.RequestMove(ctx, 7, "rs-a"), s.Drain(ctx, "rs-b"), s.Drain(ctx, "rs-b"), s.RequestRebalance(ctx)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a move (the later), a drain and a rebalance",
		is(Requests{Moves: map[uint64]string{7: "rs-a"}, Drained: map[string]bool{"rs-b": true}, Rebalance: true}))
	for _, err := range []error{s.FinishMove(ctx, 7, "rs-a"), s.FinishMove(ctx, 7, "rs-a"), s.Undrain(ctx, "rs-b"), s.FinishRebalance(ctx)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "no requests", is(Requests{Moves: map[uint64]string{}, Drained: map[string]bool{}}))
	if err := s.RequestMove(ctx, 0, "x"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a move of region 0: %v", err)
	}
	if err := s.Drain(ctx, "a/b"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a drain of a/b: %v", err)
	}
}
