package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// Health is what a region server publishes, as the ephemeral znode
// <root>/health/<name>, while its volume cannot store writes (a full or
// failing disk, docs/failover.md); the znode is absent while it can.
// Started names the run it reports for; the master counts the report only
// while that run is registered. A server primary of a region publishes it
// once it stopped serving as primary, for a new run it then registers as
// (a step-down: the master fails its regions over as for a restarted
// server); one primary of nothing publishes it for its registered run
// (its backup roles stay). The master gives it no new role until the
// znode goes. Readers ignore fields they do not know.
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
// session), replacing one an earlier session left (deleted, then created)
// or this session's (in place: WatchHealth sees its content change); nil
// deletes it.
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
			_, err := s.conn.Create(p, data, zk.FlagEphemeral, s.acl)
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
		if h, ok := s.decodeHealth(k, data); ok {
			out[k] = h
		}
	}
	return out, nil
}

// decodeHealth decodes server name's report; a malformed one is logged
// and ignored (ok false).
func (s *Session) decodeHealth(name string, data []byte) (Health, bool) {
	h, err := decodeHealthData(name, data)
	if err != nil {
		s.log.Warn("malformed health znode ignored", zap.String("znode", s.path("health", name)), zap.ByteString("data", data), zap.NamedError("decode", err))
		return Health{}, false
	}
	return h, true
}

// decodeHealthData decodes the data of health znode name.
func decodeHealthData(name string, data []byte) (Health, error) {
	var h Health
	if err := json.Unmarshal(data, &h); err != nil {
		return Health{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if h.Name != name {
		return Health{}, fmt.Errorf("%w: health of %q in the znode of %q", ErrMalformed, h.Name, name)
	}
	return h, nil
}

// WatchHealth calls fn with the servers' health reports (by name) now and
// after every change, until ctx ends: a report created or deleted, and a
// report's content replaced in place (SetHealth updates its own session's
// znode: a new episode names a new run, a state changes). Malformed znodes
// are logged and skipped. fn may see the same reports twice (after a
// reconnect).
func (s *Session) WatchHealth(ctx context.Context, fn func(map[string]Health)) {
	dir := s.path("health")
	for ctx.Err() == nil && !s.closed() {
		kids, _, ch, err := s.conn.ChildrenW(dir)
		var data []<-chan zk.Event // the reports' data watches
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			ok, _, ch, err = s.conn.ExistsW(dir)
			if err == nil && ok {
				continue // created meanwhile: list it
			}
			if err == nil {
				fn(map[string]Health{})
			}
		} else if err == nil {
			var out map[string]Health
			if out, data, err = s.readHealthW(kids); err == nil {
				fn(out)
			}
		}
		if err != nil {
			s.nextRound(ctx, nil, err)
			continue
		}
		s.waitAny(ctx, append(data, ch))
	}
}

// readHealthW reads the reports kids name, setting a data watch on each
// (a report deleted meanwhile is skipped: the children watch fires).
func (s *Session) readHealthW(kids []string) (map[string]Health, []<-chan zk.Event, error) {
	out := map[string]Health{}
	var chs []<-chan zk.Event
	for _, k := range kids {
		p := s.path("health", k)
		data, _, ch, err := s.conn.GetW(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		chs = append(chs, ch)
		if h, ok := s.decodeHealth(k, data); ok {
			out[k] = h
		}
	}
	return out, chs, nil
}

// waitAny waits until one of chs delivers, ctx ends or the session is
// closed.
func (s *Session) waitAny(ctx context.Context, chs []<-chan zk.Event) {
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.done)},
	}
	for _, ch := range chs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	reflect.Select(cases)
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
