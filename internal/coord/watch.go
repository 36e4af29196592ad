package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// retryPause is how long a watch loop waits after an error (a lost
// connection) before asking again.
const retryPause = 100 * time.Millisecond

// WatchData calls fn with the data of the znode at path (ok false while it
// does not exist) now and after every change, until ctx ends. Changes are
// never missed: the watch is re-armed before fn runs, and after an error
// the znode is read again. fn may see the same state twice (after a
// reconnect) but never an older one after a newer one.
func (s *Session) WatchData(ctx context.Context, path string, fn func(data []byte, ok bool)) {
	var last int64 = -1 // Mzxid delivered last; 0: "absent" delivered
	for ctx.Err() == nil && !s.closed() {
		data, st, ch, err := s.conn.GetW(path)
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			ok, _, ch, err = s.conn.ExistsW(path)
			if err == nil && ok {
				continue // created meanwhile: read it
			}
			if err == nil && last != 0 {
				last = 0
				fn(nil, false)
			}
		} else if err == nil && st.Mzxid > last {
			last = st.Mzxid
			fn(data, true)
		}
		s.nextRound(ctx, ch, err)
	}
}

// WatchChildren calls fn with the children of path (nil while it does not
// exist) now and after every change, until ctx ends.
func (s *Session) WatchChildren(ctx context.Context, path string, fn func(children []string)) {
	for ctx.Err() == nil && !s.closed() {
		kids, _, ch, err := s.conn.ChildrenW(path)
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			ok, _, ch, err = s.conn.ExistsW(path)
			if err == nil && ok {
				continue
			}
			if err == nil {
				fn(nil)
			}
		} else if err == nil {
			fn(kids)
		}
		s.nextRound(ctx, ch, err)
	}
}

// nextRound ends one round of a watch loop: after an error (a lost
// connection) it pauses, otherwise it waits for the watch to fire; ctx's
// end or the session's close cut either short.
func (s *Session) nextRound(ctx context.Context, ch <-chan zk.Event, err error) {
	if err != nil {
		select {
		case <-ctx.Done():
		case <-time.After(retryPause):
		}
		return
	}
	select {
	case <-ctx.Done():
	case <-s.done:
	case <-ch:
	}
}

// retry runs op until it succeeds, fails with an error other than a lost
// connection (a refusal for want of rights, zk.ErrNoAuth, wrapped in
// ErrAuth), or ctx ends. Once the session is closed it fails at once
// with ErrNoSession (a closed connection would look transient forever).
func (s *Session) retry(ctx context.Context, op func() error) error {
	for {
		err := op()
		if err == nil {
			return nil
		}
		if s.closed() {
			return fmt.Errorf("%w: the session is closed (%w)", ErrNoSession, err)
		}
		if errors.Is(err, zk.ErrNoAuth) {
			return fmt.Errorf("%w: %w", ErrAuth, err)
		}
		if !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-s.done:
		case <-time.After(retryPause):
		}
	}
}

// transient reports errors worth retrying: the connection (not the
// session) was lost.
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer)
}
