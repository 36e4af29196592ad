package coord

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// Health is what a region server publishes, as the ephemeral znode
// <root>/health/<name>, while its volume cannot store writes (a full or
// failing disk, docs/failover.md); the znode is absent while it can. A
// server publishes it only once it stopped serving as primary under its
// earlier run, and registers again as run Started (a step-down): the
// master then fails its regions over as for a restarted server and gives
// it no new role until the znode goes. Readers ignore fields they do not
// know.
type Health struct {
	Name    string `json:"name"`
	Started int64  `json:"started"` // the run that reports (ServerInfo.Started)
	State   string `json:"state"`   // "no-space" or "failed"
	Error   string `json:"error,omitempty"`
	Since   int64  `json:"since"` // when the server found out (unix ns)
}

// Health states.
const (
	HealthNoSpace = "no-space" // transient: the server probes for space and clears it
	HealthFailed  = "failed"   // a write or sync failed: until the server restarts
)

// SetHealth publishes h as server name's health znode (ephemeral, of this
// session), replacing one an earlier session left; nil deletes it.
func (s *Session) SetHealth(ctx context.Context, name string, h *Health) error {
	dir := s.path("health")
	p := s.path("health", name)
	if h == nil {
		return s.retry(ctx, func() error {
			err := s.conn.Delete(p, -1)
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return err
		})
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := s.ensure(ctx, dir); err != nil {
		return err
	}
	for ctx.Err() == nil {
		err := s.retry(ctx, func() error {
			_, err := s.conn.Create(p, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			return err
		})
		if !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		var st *zk.Stat
		err = s.retry(ctx, func() (err error) {
			_, st, err = s.conn.Get(p)
			return err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue // gone meanwhile: create it
		case err != nil:
			return err
		case st.EphemeralOwner == s.conn.SessionID():
			err = s.retry(ctx, func() error {
				_, err := s.conn.Set(p, data, st.Version)
				return err
			})
			if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
				continue
			}
			return err
		}
		// An earlier session's (a restart): this one's report replaces it.
		err = s.retry(ctx, func() error { return s.conn.Delete(p, st.Version) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
	}
	return ctx.Err()
}

// HealthReports returns the servers' health reports now, by name.
func (s *Session) HealthReports(ctx context.Context) (map[string]Health, error) {
	var kids []string
	err := s.retry(ctx, func() (err error) {
		kids, _, err = s.conn.Children(s.path("health"))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return map[string]Health{}, nil
	}
	if err != nil {
		return nil, err
	}
	return s.readHealth(ctx, kids)
}

func (s *Session) readHealth(ctx context.Context, kids []string) (map[string]Health, error) {
	out := map[string]Health{}
	for _, k := range kids {
		var data []byte
		err := s.retry(ctx, func() (err error) {
			data, _, err = s.conn.Get(s.path("health", k))
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var h Health
		if err := json.Unmarshal(data, &h); err != nil || h.Name != k {
			s.log.Warn("malformed health znode ignored", zap.String("znode", s.path("health", k)), zap.ByteString("data", data), zap.NamedError("decode", err))
			continue
		}
		out[k] = h
	}
	return out, nil
}

// WatchHealth calls fn with the servers' health reports (by name) now and
// after every change of the set, until ctx ends. Malformed znodes are
// logged and skipped.
func (s *Session) WatchHealth(ctx context.Context, fn func(map[string]Health)) {
	s.WatchChildren(ctx, s.path("health"), func(kids []string) {
		if out, err := s.readHealth(ctx, kids); err == nil {
			fn(out)
		}
	})
}

// Deregister deletes server name's registration if this session made it
// (the server registers again as a new run: watchers of the server list
// see it go and come back).
func (s *Session) Deregister(ctx context.Context, name string) error {
	p := s.path("servers", name)
	return s.retry(ctx, func() error {
		_, st, err := s.conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.EphemeralOwner != s.conn.SessionID() {
			return nil
		}
		err = s.conn.Delete(p, st.Version)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
}
