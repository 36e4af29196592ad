package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// MasterInfo is what a running master publishes at <root>/masters/<name>,
// whether it leads or not: how operators' tools reach it.
type MasterInfo struct {
	Name string `json:"name"`
	// HTTP is the host:port of the master's HTTP endpoints; empty when it
	// has none.
	HTTP string `json:"http,omitempty"`
}

// Announce keeps info published as an ephemeral znode of this session
// until ctx ends (published again after each session expiry), then
// deletes it. It blocks; a failure to publish is logged and retried.
func (s *Session) Announce(ctx context.Context, info MasterInfo) {
	data, err := json.Marshal(info)
	if err != nil {
		s.log.Error("master announcement not encoded", zap.Error(err))
		return
	}
	p := s.path("masters", info.Name)
	for ctx.Err() == nil {
		expired := s.Expired()
		err := s.ensure(ctx, s.path("masters"))
		if err == nil {
			err = s.retry(ctx, func() error {
				_, err := s.conn.Create(p, data, zk.FlagEphemeral, s.acl)
				if errors.Is(err, zk.ErrNodeExists) {
					var st *zk.Stat
					if _, st, err = s.conn.Get(p); err == nil {
						if st.EphemeralOwner != s.conn.SessionID() {
							return zk.ErrNodeExists // an earlier session's, until it expires
						}
						_, err = s.conn.Set(p, data, st.Version)
					}
				}
				return err
			})
		}
		var again <-chan time.Time
		if err != nil && ctx.Err() == nil {
			s.log.Warn("master announcement not published; retrying", zap.String("znode", p), zap.Error(err))
			again = time.After(retryPause)
		}
		select {
		case <-ctx.Done():
		case <-s.done:
			return
		case <-expired:
		case <-again:
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	_ = s.retry(dctx, func() error {
		_, st, err := s.conn.Get(p)
		if err != nil || st.EphemeralOwner != s.conn.SessionID() {
			return nil // gone, or not this session's
		}
		if err := s.conn.Delete(p, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	})
}

// Masters returns the announced masters by name (malformed znodes are
// logged and skipped).
func (s *Session) Masters(ctx context.Context) (map[string]MasterInfo, error) {
	var kids []string
	err := s.retry(ctx, func() (err error) {
		kids, _, err = s.conn.Children(s.path("masters"))
		return err
	})
	out := map[string]MasterInfo{}
	if errors.Is(err, zk.ErrNoNode) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("coord: list masters: %w", err)
	}
	for _, k := range kids {
		var data []byte
		err := s.retry(ctx, func() (err error) {
			data, _, err = s.conn.Get(s.path("masters", k))
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var mi MasterInfo
		if err := json.Unmarshal(data, &mi); err != nil || mi.Name != k {
			s.log.Warn("malformed master znode ignored", zap.String("znode", s.path("masters", k)), zap.ByteString("data", data))
			continue
		}
		out[k] = mi
	}
	return out, nil
}
