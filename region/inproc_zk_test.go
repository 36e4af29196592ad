package region_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/coord/coordtest"
)

// zkLink is one server's session seen through a link that can be cut, as
// a network partition between the server and ZooKeeper (or a pause of
// its process) would: while cut, the server's calls wait (as a
// ZooKeeper client waits for its connection), its watches deliver
// nothing and its lease is not renewed. The session itself lives on at
// the coordinator: the test decides when it expires there
// (Coordinator.RemoveServer, as the ensemble would after the session
// timeout) and when the server learns it (heal).
type zkLink struct {
	*coordtest.Session

	mu sync.Mutex
	// open is closed while the link is up; replaced by a new channel at
	// cut. maps is the same for map deliveries only (deliverMaps opens
	// it before the rest).
	open, maps chan struct{}
	// keepLease: the lease is renewed through the cut (a paused process
	// whose requests all passed their lease check before the pause).
	keepLease bool
	// renewing counts the loops renewing the lease now (KeepLease): 0
	// once a cut that does not keep the lease has stopped them.
	renewing atomic.Int32
	// changed is closed and replaced at every cut and heal.
	changed   chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func newZKLink(s *coordtest.Session) *zkLink {
	l := &zkLink{Session: s, open: make(chan struct{}), maps: make(chan struct{}), changed: make(chan struct{}), closed: make(chan struct{})}
	close(l.open)
	close(l.maps)
	return l
}

// cut cuts the link; keepLease keeps the lease renewed meanwhile.
func (l *zkLink) cut(keepLease bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open, l.maps, l.keepLease = make(chan struct{}), make(chan struct{}), keepLease
	close(l.changed)
	l.changed = make(chan struct{})
}

// deliverMaps lets the map watch deliver again (the latest map), the
// rest of the link still cut.
func (l *zkLink) deliverMaps() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.maps:
	default:
		close(l.maps)
	}
}

// heal expires the session (the server learns it as it reconnects: its
// registration is gone) and restores the link.
func (l *zkLink) heal() {
	l.Session.Expire()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range []chan struct{}{l.open, l.maps} {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	l.keepLease = false
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait waits until the link (or, mapsOnly, its map deliveries) is up,
// ctx ends or the session closes.
func (l *zkLink) wait(ctx context.Context, mapsOnly bool) error {
	l.mu.Lock()
	ch := l.open
	if mapsOnly {
		ch = l.maps
	}
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("zkLink: cut: %w", ctx.Err())
	case <-l.closed:
		return fmt.Errorf("zkLink: %w", coord.ErrNoSession)
	}
}

func (l *zkLink) Close() {
	l.closeOnce.Do(func() { close(l.closed) })
	l.Session.Close()
}

func (l *zkLink) Register(ctx context.Context, srv coord.ServerInfo) error {
	if err := l.wait(ctx, false); err != nil {
		return err
	}
	return l.Session.Register(ctx, srv)
}

func (l *zkLink) Deregister(ctx context.Context, name string) error {
	if err := l.wait(ctx, false); err != nil {
		return err
	}
	return l.Session.Deregister(ctx, name)
}

func (l *zkLink) SetHealth(ctx context.Context, name string, h *coord.Health) error {
	if err := l.wait(ctx, false); err != nil {
		return err
	}
	return l.Session.SetHealth(ctx, name, h)
}

func (l *zkLink) Report(ctx context.Context, r coord.Report) error {
	if err := l.wait(ctx, false); err != nil {
		return err
	}
	return l.Session.Report(ctx, r)
}

func (l *zkLink) ReadMap(ctx context.Context) (*regionmap.Map, int32, error) {
	if err := l.wait(ctx, false); err != nil {
		return nil, 0, err
	}
	return l.Session.ReadMap(ctx)
}

func (l *zkLink) WatchMap(ctx context.Context, fn func(*regionmap.Map), bad func(error)) {
	l.Session.WatchMap(ctx, func(m *regionmap.Map) {
		if l.wait(ctx, true) == nil {
			fn(m)
		}
	}, bad)
}

func (l *zkLink) WatchServers(ctx context.Context, fn func(map[string]coord.ServerInfo)) {
	l.Session.WatchServers(ctx, func(s map[string]coord.ServerInfo) {
		if l.wait(ctx, false) == nil {
			fn(s)
		}
	})
}

// KeepLease renews the lease while the link is up, or while the cut
// keeps it (then whatever the coordinator says of the registration); a
// cut that does not keep it stops the renewals: the lease runs out.
func (l *zkLink) KeepLease(ctx context.Context, name string) {
	for {
		l.mu.Lock()
		open, keep, changed := l.open, l.keepLease, l.changed
		l.mu.Unlock()
		kctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
			case <-l.closed:
			case <-kctx.Done():
			}
			cancel()
		}()
		switch {
		case isClosed(open):
			l.renewing.Add(1)
			l.Session.KeepLease(kctx, name)
			l.renewing.Add(-1)
		case keep:
			l.renewing.Add(1)
			every := inprocSessionTimeout / 8
			for kctx.Err() == nil {
				lease := l.Lease()
				lease.Confirm(lease.Begin())
				select {
				case <-kctx.Done():
				case <-time.After(every):
				}
			}
			l.renewing.Add(-1)
		default:
			<-kctx.Done()
		}
		cancel()
		if ctx.Err() != nil || isClosed(l.closed) {
			return
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
