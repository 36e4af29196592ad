package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
)

// Term is a won master election as its holder uses it: *Leadership
// implements it, and so does the in-memory coordinator of tests
// (coordtest). Its methods are safe for concurrent use.
type Term interface {
	// Lost is closed when the leadership ends.
	Lost() <-chan struct{}
	// Resign ends the leadership: the next candidate takes over.
	Resign()
	// WriteMap replaces the region map if its znode is still at version
	// and the leadership holds: ErrConflict, ErrNotLeader or ErrNoMap
	// otherwise.
	WriteMap(ctx context.Context, m *regionmap.Map, version int32) error
}

var _ Term = (*Leadership)(nil)

// Leadership is a won master election. It lasts while its candidate znode
// exists: until Resign, or the session's expiry or Close (Lost is closed
// then). Map writes made through it are fenced: they fail with
// ErrNotLeader once the candidacy is gone, so a deposed master can never
// overwrite the map.
type Leadership struct {
	s    *Session
	node string // full path of the candidate znode
	lost chan struct{}
	once sync.Once
}

// Lost is closed when the leadership ends: the session that won expired
// or was closed, or the candidate znode is gone (Resign, or deleted by
// hand).
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

func (l *Leadership) end() { l.once.Do(func() { close(l.lost) }) }

// watch closes lost once the candidacy ends; expired is closed at the
// session's next expiry.
func (l *Leadership) watch(expired <-chan struct{}) {
	defer l.end()
	for {
		ok, _, ch, err := l.s.conn.ExistsW(l.node)
		if err == nil && !ok {
			return // deleted
		}
		if err != nil && !transient(err) {
			return // expired, closed, or unknown: do not claim to lead
		}
		var again <-chan time.Time
		if err != nil {
			again = time.After(retryPause)
		}
		select {
		case <-expired:
			return
		case <-l.s.done:
			return
		case <-ch:
		case <-again:
		}
	}
}

// Resign deletes the candidate znode: the next candidate takes over. It
// retries a lost connection for up to about the session timeout (after
// which the session, and the znode with it, is gone anyway).
func (l *Leadership) Resign() {
	l.s.deleteCandidate(l.node)
	l.end()
}

// deleteCandidate deletes a candidate znode of this session. One left
// behind would block this session's next candidacy for good: it would
// wait for its own earlier znode.
func (s *Session) deleteCandidate(node string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout+time.Second)
	defer cancel()
	err := s.retry(ctx, func() error {
		err := s.conn.Delete(node, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNoSession) && !errors.Is(err, zk.ErrSessionExpired) {
		s.log.Warn("master candidate znode not deleted", zap.String("znode", node), zap.Error(err))
	}
}

// Campaign enters the election as name and blocks until this candidate
// leads (every earlier candidate's znode is gone) or ctx ends. Candidates
// are served in the order they entered; a candidate whose session expired
// enters again at the back. A candidacy given up (ctx ended, an error) is
// withdrawn.
func (s *Session) Campaign(ctx context.Context, name string) (*Leadership, error) {
	dir := s.path("election")
	if err := s.ensure(ctx, dir); err != nil {
		return nil, err
	}
	for ctx.Err() == nil {
		lost := s.Expired()
		var node string
		err := s.retry(ctx, func() (err error) {
			node, err = s.conn.CreateProtectedEphemeralSequential(dir+"/c-", []byte(name), s.acl)
			return err
		})
		if errors.Is(err, zk.ErrSessionExpired) {
			continue // the next session enters
		}
		if err != nil {
			return nil, fmt.Errorf("coord: enter the master election: %w", err)
		}
		l, err := s.await(ctx, dir, node, lost)
		if l != nil || err != nil {
			return l, err
		}
		// The candidacy vanished with an expired session: enter again.
	}
	return nil, ctx.Err()
}

// await waits until the candidate znode node leads. It returns nil, nil
// if the znode vanished (the session expired); lost is closed at the
// session's next expiry.
func (s *Session) await(ctx context.Context, dir, node string, lost <-chan struct{}) (_ *Leadership, err error) {
	defer func() {
		if err != nil {
			s.deleteCandidate(node)
		}
	}()
	mine := node[strings.LastIndex(node, "/")+1:]
	for {
		var kids []string
		err := s.retry(ctx, func() (err error) {
			kids, _, err = s.conn.Children(dir)
			return err
		})
		if errors.Is(err, zk.ErrSessionExpired) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		kids = sortedBySeq(kids)
		idx := slices.Index(kids, mine)
		if idx < 0 {
			return nil, nil
		}
		if idx == 0 {
			l := &Leadership{s: s, node: node, lost: make(chan struct{})}
			go l.watch(lost)
			return l, nil
		}
		ok, _, ch, err := s.conn.ExistsW(dir + "/" + kids[idx-1])
		switch {
		case errors.Is(err, zk.ErrSessionExpired):
			return nil, nil
		case err != nil && !transient(err):
			return nil, err
		case err != nil || !ok:
			continue // Children pauses while the connection is lost
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-lost:
		case <-s.done:
		case <-ch:
		}
	}
}

// Leader returns the name of the leading master candidate ("" if none).
func (s *Session) Leader(ctx context.Context) (string, error) {
	dir := s.path("election")
	var kids []string
	err := s.retry(ctx, func() (err error) {
		kids, _, err = s.conn.Children(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, k := range sortedBySeq(kids) {
		data, _, err := s.conn.Get(dir + "/" + k)
		if err == nil {
			return string(data), nil
		}
	}
	return "", nil
}

// WriteMap replaces the region map if its znode is still at version
// (compare-and-set) and this leadership still holds, in one ZooKeeper
// transaction. ErrConflict: the map changed; ErrNotLeader: deposed (also
// when the session is closed); ErrNoMap: there is no map to replace.
func (l *Leadership) WriteMap(ctx context.Context, m *regionmap.Map, version int32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s := l.s
	var res []zk.MultiResponse
	err = s.retry(ctx, func() (err error) {
		res, err = s.conn.Multi(
			&zk.CheckVersionRequest{Path: l.node, Version: -1},
			&zk.SetDataRequest{Path: s.path("map"), Data: data, Version: version},
		)
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoSession):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case len(res) == 2 && errors.Is(res[0].Error, zk.ErrNoNode):
		return ErrNotLeader
	case len(res) == 2 && errors.Is(res[1].Error, zk.ErrNoNode):
		return ErrNoMap
	case errors.Is(err, zk.ErrBadVersion):
		return fmt.Errorf("%w (expected znode version %d)", ErrConflict, version)
	case errors.Is(err, zk.ErrNoNode):
		return ErrNotLeader
	}
	return fmt.Errorf("coord: write the region map: %w", err)
}
