package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/tebis-go/tebis/region/regionmap"
)

// Leadership is a won master election. It lasts while its candidate znode
// exists: until Resign, or the session's expiry (Lost is closed then).
// Map writes made through it are fenced: they fail with ErrNotLeader once
// the candidacy is gone, so a deposed master can never overwrite the map.
type Leadership struct {
	s    *Session
	node string // full path of the candidate znode
	lost <-chan struct{}
}

// Lost is closed when the session that won expires.
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Resign deletes the candidate znode: the next candidate takes over.
func (l *Leadership) Resign() {
	_ = l.s.conn.Delete(l.node, -1)
}

// Campaign enters the election as name and blocks until this candidate
// leads (every earlier candidate's znode is gone) or ctx ends. Candidates
// are served in the order they entered; a candidate whose session expired
// enters again at the back.
func (s *Session) Campaign(ctx context.Context, name string) (*Leadership, error) {
	dir := s.path("election")
	if err := s.ensure(ctx, dir); err != nil {
		return nil, err
	}
	for ctx.Err() == nil {
		lost := s.Expired()
		var node string
		err := retry(ctx, func() (err error) {
			node, err = s.conn.CreateProtectedEphemeralSequential(dir+"/c-", []byte(name), zk.WorldACL(zk.PermAll))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("coord: enter the master election: %w", err)
		}
		mine := node[strings.LastIndex(node, "/")+1:]
		for {
			var kids []string
			err := retry(ctx, func() (err error) {
				kids, _, err = s.conn.Children(dir)
				return err
			})
			if err != nil {
				return nil, err
			}
			kids = sortedBySeq(kids)
			idx := -1
			for i, k := range kids {
				if k == mine {
					idx = i
				}
			}
			if idx < 0 {
				break // our znode vanished (session expired): enter again
			}
			if idx == 0 {
				return &Leadership{s: s, node: node, lost: lost}, nil
			}
			ok, _, ch, err := s.conn.ExistsW(dir + "/" + kids[idx-1])
			if err != nil && !transient(err) {
				return nil, err
			}
			if err != nil || !ok {
				continue
			}
			select {
			case <-ctx.Done():
				_ = s.conn.Delete(node, -1)
				return nil, ctx.Err()
			case <-lost:
			case <-ch:
			}
		}
	}
	return nil, ctx.Err()
}

// Leader returns the name of the leading master candidate ("" if none).
func (s *Session) Leader(ctx context.Context) (string, error) {
	dir := s.path("election")
	kids, _, err := s.conn.Children(dir)
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
// transaction. ErrConflict: the map changed; ErrNotLeader: deposed.
func (l *Leadership) WriteMap(ctx context.Context, m *regionmap.Map, version int32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s := l.s
	err = retry(ctx, func() error {
		_, err := s.conn.Multi(
			&zk.CheckVersionRequest{Path: l.node, Version: -1},
			&zk.SetDataRequest{Path: s.path("map"), Data: data, Version: version},
		)
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrBadVersion):
		return fmt.Errorf("%w (expected znode version %d)", ErrConflict, version)
	case errors.Is(err, zk.ErrNoNode):
		return ErrNotLeader
	}
	return fmt.Errorf("coord: write the region map: %w", err)
}
