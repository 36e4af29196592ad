package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
)

// The znode layout under the root (docs/failover.md):
//
//	<root>/servers/<name>    ephemeral: a live region server (ServerInfo, JSON)
//	<root>/health/<name>     ephemeral: a region server whose volume cannot
//	                         store writes (Health, JSON; health.go)
//	<root>/election/c-<seq>  ephemeral sequential: master candidates (name)
//	<root>/masters/<name>    ephemeral: a running master (MasterInfo, JSON;
//	                         masters.go)
//	<root>/map               persistent: the region map (JSON), written by
//	                         the leading master with compare-and-set
//	<root>/reports/<region>-<epoch>-<server>
//	                         persistent: a primary reports that a joining
//	                         backup finished its seeding (JoinReport)
//	<root>/reports/drop-<region>-<epoch>-<server>
//	                         persistent: a primary reports a backup it
//	                         dropped (DropReport)
//	<root>/reports/log-<region>-<epoch>-<pos>-<server>
//	<root>/reports/logi-<region>-<epoch>-<pos>-<server>
//	                         persistent: a backup reports how much of its
//	                         failed primary's log it holds, its copy
//	                         complete (log-) or not (logi-) (LogReport)
//	<root>/reports/lost-<region>-<epoch>-<server>
//	                         persistent: a backup lost the region's
//	                         primary's connections and fenced it off
//	                         (LostReport)
//	<root>/reports/release-<region>-<epoch>-<server>
//	                         persistent: a primary the map moves away
//	                         released the region (ReleaseReport)
//	<root>/admin/...         persistent: operators' requests (admin.go)

// Errors of the layout operations.
var (
	ErrNoMap     = errors.New("coord: no region map in zookeeper (run tebis cluster init)")
	ErrConflict  = errors.New("coord: the region map changed meanwhile")
	ErrExists    = errors.New("coord: already exists")
	ErrNotLeader = errors.New("coord: not the leading master")
)

func (s *Session) path(parts ...string) string {
	return path.Join(append([]string{s.root}, parts...)...)
}

// ensure creates path and its parents as empty persistent znodes.
func (s *Session) ensure(ctx context.Context, p string) error {
	if p == "/" || p == "" {
		return nil
	}
	if err := s.ensure(ctx, path.Dir(p)); err != nil {
		return err
	}
	return s.retry(ctx, func() error {
		_, err := s.conn.Create(p, nil, 0, s.acl)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	})
}

// ServerInfo is what a live region server publishes.
type ServerInfo struct {
	regionmap.Server
	// Started identifies this run of the server (its start time, ns): a
	// restart within the session timeout is a different incarnation.
	Started int64 `json:"started"`
	// HTTP is the host:port of the server's HTTP endpoints (/healthz,
	// /readyz, its status page); empty when it has none. Readers that do
	// not know the field ignore it.
	HTTP string `json:"http,omitempty"`
}

// Register publishes srv as live (an ephemeral znode of this session). A
// znode left by an earlier session of the same name (a restart within the
// session timeout) is waited out, bounded by ctx.
func (s *Session) Register(ctx context.Context, srv ServerInfo) error {
	if err := s.ensure(ctx, s.path("servers")); err != nil {
		return err
	}
	data, err := json.Marshal(srv)
	if err != nil {
		return err
	}
	p := s.path("servers", srv.Name)
	for {
		err := s.retry(ctx, func() error {
			_, err := s.conn.Create(p, data, zk.FlagEphemeral, s.acl)
			if errors.Is(err, zk.ErrNodeExists) {
				_, st, gerr := s.conn.Get(p)
				if gerr == nil && st.EphemeralOwner == s.conn.SessionID() {
					_, err = s.conn.Set(p, data, st.Version)
				}
			}
			return err
		})
		if !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("coord: server %s is still registered by an earlier session: %w", srv.Name, ctx.Err())
		case <-time.After(retryPause):
		}
	}
}

// ErrMalformed: a znode's data does not decode, or names another server
// than its znode.
var ErrMalformed = errors.New("coord: malformed znode data")

// decodeServerInfo decodes the data of server znode name.
func decodeServerInfo(name string, data []byte) (ServerInfo, error) {
	var si ServerInfo
	if err := json.Unmarshal(data, &si); err != nil {
		return ServerInfo{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if si.Name != name {
		return ServerInfo{}, fmt.Errorf("%w: server %q in the znode of %q", ErrMalformed, si.Name, name)
	}
	return si, nil
}

// Servers returns the live region servers by name (malformed server
// znodes are logged and skipped).
func (s *Session) Servers(ctx context.Context) (map[string]ServerInfo, error) {
	var kids []string
	err := s.retry(ctx, func() (err error) {
		kids, _, err = s.conn.Children(s.path("servers"))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return map[string]ServerInfo{}, nil
	}
	if err != nil {
		return nil, err
	}
	return s.readServers(ctx, kids)
}

func (s *Session) readServers(ctx context.Context, kids []string) (map[string]ServerInfo, error) {
	out := map[string]ServerInfo{}
	for _, k := range kids {
		var data []byte
		err := s.retry(ctx, func() (err error) {
			data, _, err = s.conn.Get(s.path("servers", k))
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone meanwhile
		}
		if err != nil {
			return nil, err
		}
		si, err := decodeServerInfo(k, data)
		if err != nil {
			// Skipped, not fatal: one bad znode must not hide the others.
			s.log.Warn("malformed region server znode ignored", zap.String("znode", s.path("servers", k)),
				zap.ByteString("data", data), zap.NamedError("decode", err))
			continue
		}
		out[k] = si
	}
	return out, nil
}

// WatchServers calls fn with the live servers now and after every change
// of membership, until ctx ends.
func (s *Session) WatchServers(ctx context.Context, fn func(map[string]ServerInfo)) {
	s.WatchChildren(ctx, s.path("servers"), func(kids []string) {
		m, err := s.readServers(ctx, kids)
		if err != nil {
			m = nil
		}
		if m != nil {
			fn(m)
		}
	})
}

// ReadMap returns the region map and its znode version.
func (s *Session) ReadMap(ctx context.Context) (*regionmap.Map, int32, error) {
	var data []byte
	var st *zk.Stat
	err := s.retry(ctx, func() (err error) {
		data, st, err = s.conn.Get(s.path("map"))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, 0, ErrNoMap
	}
	if err != nil {
		return nil, 0, err
	}
	m, err := DecodeMap(data)
	if err != nil {
		return nil, 0, err
	}
	return m, st.Version, nil
}

// DecodeMap decodes and validates a map znode's data.
func DecodeMap(data []byte) (*regionmap.Map, error) {
	var m regionmap.Map
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", regionmap.ErrInvalid, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// CreateMap publishes the first region map; ErrExists if there is one.
func (s *Session) CreateMap(ctx context.Context, m *regionmap.Map) error {
	if err := m.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.ensure(ctx, s.root); err != nil {
		return err
	}
	err = s.retry(ctx, func() error {
		_, err := s.conn.Create(s.path("map"), data, 0, s.acl)
		return err
	})
	if errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("%w: a region map at %s", ErrExists, s.path("map"))
	}
	return err
}

// WatchMap calls fn with every valid version of the region map, now and
// after each change, until ctx ends. An invalid map is reported to bad
// (which may be nil) and skipped.
func (s *Session) WatchMap(ctx context.Context, fn func(*regionmap.Map), bad func(error)) {
	s.WatchData(ctx, s.path("map"), func(data []byte, ok bool) {
		if !ok {
			return
		}
		m, err := DecodeMap(data)
		if err != nil {
			if bad != nil {
				bad(err)
			}
			return
		}
		fn(m)
	})
}

// sortedBySeq orders sequential znode names by their sequence suffix.
func sortedBySeq(kids []string) []string {
	out := append([]string(nil), kids...)
	sort.Slice(out, func(i, j int) bool { return seqOf(out[i]) < seqOf(out[j]) })
	return out
}

func seqOf(name string) string {
	if len(name) < 10 {
		return name
	}
	return name[len(name)-10:]
}
