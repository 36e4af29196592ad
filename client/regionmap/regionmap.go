// Package regionmap is the cluster's region map: for each key range, its
// primary, its backups (and joining ones) and its epoch, with the
// replication scheme and copy counts, under a version number that grows
// with every change. Servers and clients read it from a file (File) or
// take it as given (Static) in standalone mode; in a managed cluster the
// master publishes it in ZooKeeper (client.ZooKeeper is that Source).
//
// A Map is immutable once loaded or built: share it freely between
// goroutines and replace it as a whole.
package regionmap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"

	"gopkg.in/yaml.v3"
)

// ErrInvalid: a map breaks one of its rules (see Validate).
var ErrInvalid = errors.New("regionmap: invalid region map")

// Server is one region server and where it listens.
type Server struct {
	Name string `yaml:"name" json:"name"`
	Shm  string `yaml:"shm,omitempty" json:"shm,omitempty"` // unix socket path
	TCP  string `yaml:"tcp,omitempty" json:"tcp,omitempty"` // host:port
	// Started is the run of the server the map's roles are for (its start
	// time, ns; managed clusters). A server whose run differs (it
	// restarted) takes up no role until the master has published it.
	Started int64 `yaml:"started,omitempty" json:"started,omitempty"`
}

// Addr returns the server's address on a transport, or "".
func (s Server) Addr(transport string) string {
	switch transport {
	case "shm":
		return s.Shm
	case "tcp":
		return s.TCP
	}
	return ""
}

// Assignment is one region as the map assigns it: its key range [Start,
// End) (an empty Start is the first key, an empty End the end of the key
// space), the server that is its primary, its backups, and the epoch of
// that assignment. (The region's data is an engine.Region on the servers;
// package region is the server.)
type Assignment struct {
	ID      uint64   `yaml:"id" json:"id"`
	Start   string   `yaml:"start" json:"start"`
	End     string   `yaml:"end" json:"end"`
	Primary string   `yaml:"primary" json:"primary"`
	Backups []string `yaml:"backups,omitempty" json:"backups,omitempty"`
	// Joining are backups being seeded: the primary replicates to them
	// like to Backups, but they hold the region's data only once the
	// primary reported them done (the master then moves them to Backups);
	// a joining backup is never promoted.
	Joining []string `yaml:"joining,omitempty" json:"joining,omitempty"`
	Epoch   uint64   `yaml:"epoch" json:"epoch"`
	// MoveTo, when set, names the backup the master is moving the
	// primary role to (an operator's move, a drain or the balancer):
	// Primary releases the region (it serves and replicates it no more,
	// then reports the release), its backups report their log positions
	// as after a primary's failure, and the master then promotes one of
	// them, MoveTo first, at a new epoch. Meanwhile the region serves no
	// request: clients retry until a newer map.
	MoveTo string `yaml:"move_to,omitempty" json:"move_to,omitempty"`
	// Released: the primary of a region being moved reported it released
	// the region (serves and replicates it no more): from this map on its
	// backups report their log positions. (A report fences the backup's
	// copy against the epoch's commands, so it must not come while the
	// primary may still stream to it.)
	Released bool `yaml:"released,omitempty" json:"released,omitempty"`
}

// Serving reports whether the map has server name serve r as primary:
// it is r's primary and r is not being moved away from it.
func (r *Assignment) Serving(name string) bool {
	return r.Primary == name && r.MoveTo == ""
}

// Group is the region's backups, joining ones included.
func (r *Assignment) Group() []string {
	return append(append([]string(nil), r.Backups...), r.Joining...)
}

// Contains reports whether key falls in the region.
func (r *Assignment) Contains(key []byte) bool {
	return bytes.Compare(key, []byte(r.Start)) >= 0 && (r.End == "" || bytes.Compare(key, []byte(r.End)) < 0)
}

// Map is a versioned region map.
type Map struct {
	Version uint64       `yaml:"version" json:"version"`
	Servers []Server     `yaml:"servers" json:"servers"`
	Regions []Assignment `yaml:"regions" json:"regions"` // sorted by Start, covering every key
	// Replication is the cluster's scheme for regions with backups:
	// "send-index" (the default) or "build-index" (the baseline).
	Replication string `yaml:"replication,omitempty" json:"replication,omitempty"`
	// Replicas is the copies (primary included) the master keeps of each
	// region; 0 leaves the groups as they are (a static map).
	Replicas int `yaml:"replicas,omitempty" json:"replicas,omitempty"`
	// MinCopies is the fewest copies, the primary counted, that hold a
	// write before it is acknowledged: the primary and every backup (not
	// joining) of the region's replication stream whose WRITE of the
	// record completed. A region with fewer refuses writes (reads go on).
	// 0 means 1. At most Replicas (a static map: at most 1 + each
	// region's backups).
	MinCopies int `yaml:"min_copies,omitempty" json:"min_copies,omitempty"`
}

// Copies is MinCopies, 0 read as 1.
func (m *Map) Copies() int { return max(m.MinCopies, 1) }

// Single is the map of one server holding one region over all keys.
func Single(server Server) *Map {
	return &Map{Version: 1, Servers: []Server{server}, Regions: []Assignment{{ID: 1, Primary: server.Name, Epoch: 1}}}
}

// Validate checks the rules: version > 0; server names unique and each
// with an address; regions with unique non-zero IDs, sorted, contiguous
// (each starts where the previous ends), covering every key (first starts
// at "", last ends at ""), non-empty, with a known primary and epoch > 0;
// 0 <= min_copies <= replicas (replicas 0: min_copies at most 1 + each
// region's backups); a region's move_to, if set, one of its backups
// (released only with move_to).
func (m *Map) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
	}
	if m.Version == 0 {
		return bad("version 0")
	}
	names := map[string]bool{}
	for _, s := range m.Servers {
		if s.Name == "" || names[s.Name] {
			return bad("server name %q empty or repeated", s.Name)
		}
		if s.Shm == "" && s.TCP == "" {
			return bad("server %q has no address", s.Name)
		}
		names[s.Name] = true
	}
	if len(m.Regions) == 0 {
		return bad("no regions")
	}
	if m.Replicas < 0 {
		return bad("replicas %d", m.Replicas)
	}
	switch {
	case m.MinCopies < 0:
		return bad("min_copies %d", m.MinCopies)
	case m.Replicas > 0 && m.MinCopies > m.Replicas:
		return bad("min_copies %d above replicas %d", m.MinCopies, m.Replicas)
	}
	if m.Replication != "" && m.Replication != "send-index" && m.Replication != "build-index" {
		return bad("replication %q (send-index or build-index)", m.Replication)
	}
	ids := map[uint64]bool{}
	for i, r := range m.Regions {
		switch {
		case r.ID == 0 || ids[r.ID]:
			return bad("region id %d zero or repeated", r.ID)
		case !names[r.Primary]:
			return bad("region %d: primary %q is not a listed server", r.ID, r.Primary)
		case r.Epoch == 0:
			return bad("region %d: epoch 0", r.ID)
		case i == 0 && r.Start != "":
			return bad("the first region starts at %q, not at the first key", r.Start)
		case i > 0 && r.Start != m.Regions[i-1].End:
			return bad("region %d starts at %q, the previous ends at %q", r.ID, r.Start, m.Regions[i-1].End)
		case r.End != "" && r.End <= r.Start:
			return bad("region %d is empty or reversed: [%q, %q)", r.ID, r.Start, r.End)
		case i == len(m.Regions)-1 && r.End != "":
			return bad("the last region ends at %q, not at the end of the key space", r.End)
		}
		if m.Replicas == 0 && m.Copies() > 1+len(r.Backups) {
			return bad("region %d: min_copies %d, but a primary and %d backups", r.ID, m.MinCopies, len(r.Backups))
		}
		seen := map[string]bool{r.Primary: true}
		for _, b := range r.Group() {
			if !names[b] || seen[b] {
				return bad("region %d: backup %q unknown, repeated or the primary", r.ID, b)
			}
			seen[b] = true
		}
		if r.MoveTo != "" && !slices.Contains(r.Backups, r.MoveTo) {
			return bad("region %d: move_to %q is not one of its backups", r.ID, r.MoveTo)
		}
		if r.Released && r.MoveTo == "" {
			return bad("region %d: released without move_to", r.ID)
		}
		ids[r.ID] = true
	}
	return nil
}

// Clone returns a deep copy of m.
func (m *Map) Clone() *Map {
	c := *m
	c.Servers = append([]Server(nil), m.Servers...)
	c.Regions = make([]Assignment, len(m.Regions))
	for i, r := range m.Regions {
		r.Backups = append([]string(nil), r.Backups...)
		r.Joining = append([]string(nil), r.Joining...)
		c.Regions[i] = r
	}
	return &c
}

// Lookup returns the region holding key.
func (m *Map) Lookup(key []byte) *Assignment {
	i := sort.Search(len(m.Regions), func(i int) bool {
		return m.Regions[i].End == "" || bytes.Compare(key, []byte(m.Regions[i].End)) < 0
	})
	if i == len(m.Regions) {
		return nil
	}
	return &m.Regions[i]
}

// Region returns the region with an ID.
func (m *Map) Region(id uint64) *Assignment {
	for i := range m.Regions {
		if m.Regions[i].ID == id {
			return &m.Regions[i]
		}
	}
	return nil
}

// Server returns the server with a name.
func (m *Map) Server(name string) (Server, bool) {
	for _, s := range m.Servers {
		if s.Name == name {
			return s, true
		}
	}
	return Server{}, false
}

// Parse decodes and validates a YAML map.
func Parse(b []byte) (*Map, error) {
	var m Map
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Marshal encodes the map as YAML.
func (m *Map) Marshal() ([]byte, error) { return yaml.Marshal(m) }

// Source yields the current map. Implementations: File and Static
// (standalone), and client.ZooKeeper (the master's publication).
type Source interface {
	Load(ctx context.Context) (*Map, error)
}

// File reads the map from a YAML file at every Load.
type File string

// Load implements Source.
func (f File) Load(context.Context) (*Map, error) {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return nil, fmt.Errorf("regionmap: %w", err)
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", string(f), err)
	}
	return m, nil
}

// Static always yields the same map.
type Static struct{ M *Map }

// Load implements Source.
func (s Static) Load(context.Context) (*Map, error) { return s.M, nil }

// WriteFile writes m atomically (temp file + rename).
func WriteFile(path string, m *Map) error {
	if err := m.Validate(); err != nil {
		return err
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
