package coordtest

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// watchers are the watches of one kind of state, by registration order.
// Guarded by the Coordinator's mu.
type watchers[T any] struct {
	next int
	ws   map[int]*watcher[T]
}

// watcher is one watch. A synchronous one is called by the mutating call
// (under the Coordinator's dmu); an asynchronous one is handed the latest
// state (pending) and called on its Watch call's goroutine.
type watcher[T any] struct {
	fn    func(T)
	async bool

	mu      sync.Mutex
	pending T
	has     bool
	wake    chan struct{} // buffered 1
}

// post replaces the state an asynchronous watcher is yet to see.
func (w *watcher[T]) post(v T) {
	w.mu.Lock()
	w.pending, w.has = v, true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// take returns the state posted last, if not taken yet.
func (w *watcher[T]) take() (T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.pending, w.has
	var zero T
	w.pending, w.has = zero, false
	return v, ok
}

// notify delivers the current state (snap, called with mu held once per
// watcher: each gets its own copy) to ws's watchers. Called with dmu held
// and mu not held.
func notify[T any](c *Coordinator, ws *watchers[T], snap func() T) {
	c.mu.Lock()
	type delivery struct {
		w *watcher[T]
		v T
	}
	var ds []delivery
	for _, id := range slices.Sorted(maps.Keys(ws.ws)) {
		ds = append(ds, delivery{ws.ws[id], snap()})
	}
	c.mu.Unlock()
	for _, d := range ds {
		if d.w.async {
			d.w.post(d.v)
		} else {
			d.w.fn(d.v)
		}
	}
}

// watch runs one watch of ws until ctx ends or done is closed: fn gets
// the state now and after every change. A synchronous watch's fn is never
// called after watch returns; an asynchronous one's only on the caller's
// goroutine.
func watch[T any](ctx context.Context, c *Coordinator, ws *watchers[T], fn func(T), async bool, done <-chan struct{}, snap func() T) {
	w := &watcher[T]{fn: fn, async: async, wake: make(chan struct{}, 1)}
	c.dmu.Lock()
	c.mu.Lock()
	if ws.ws == nil {
		ws.ws = map[int]*watcher[T]{}
	}
	id := ws.next
	ws.next++
	ws.ws[id] = w
	first := snap()
	c.mu.Unlock()
	if async {
		w.post(first)
	} else {
		fn(first)
	}
	c.dmu.Unlock()
	defer func() {
		c.dmu.Lock()
		c.mu.Lock()
		delete(ws.ws, id)
		c.mu.Unlock()
		c.dmu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-w.wake:
			if v, ok := w.take(); ok && async {
				fn(v)
			}
		}
	}
}
