package master

import (
	"fmt"
	"sort"

	"github.com/tebis-go/tebis/client/regionmap"
)

// Layout describes a new cluster's regions.
type Layout struct {
	Regions int // regions (ignored when Splits is set)
	// Splits are the keys where regions start (the first region starts at
	// the first key); when empty, Regions split the keys Prefix+digits
	// evenly (YCSB's keys are "user" followed by decimal digits).
	Splits      []string
	Prefix      string
	Replicas    int    // copies per region, primary included
	Replication string // send-index (default) or build-index
	// MinCopies is the map's min_copies: the copies, primary included,
	// that hold a write before it is acknowledged (1 to Replicas; 0 is 1).
	MinCopies int
}

// InitialMap builds a new cluster's map (version 1, epoch 1): regions as
// l says, primaries spread round-robin over servers (sorted by name), the
// backups of a region on the servers that follow its primary.
func InitialMap(servers []regionmap.Server, l Layout) (*regionmap.Map, error) {
	if l.Replicas < 1 || l.Replicas > len(servers) {
		return nil, fmt.Errorf("%w: %d replicas on %d servers", regionmap.ErrInvalid, l.Replicas, len(servers))
	}
	if l.MinCopies < 0 || l.MinCopies > l.Replicas {
		return nil, fmt.Errorf("%w: min copies %d: want 1 to the %d replicas", regionmap.ErrInvalid, l.MinCopies, l.Replicas)
	}
	splits := l.Splits
	if len(splits) == 0 {
		if l.Regions < 1 || l.Regions > 100 {
			return nil, fmt.Errorf("%w: %d regions: want 1 to 100 (or explicit splits)", regionmap.ErrInvalid, l.Regions)
		}
		splits = DigitSplits(l.Prefix, l.Regions)
	}
	srvs := append([]regionmap.Server(nil), servers...)
	sort.Slice(srvs, func(i, j int) bool { return srvs[i].Name < srvs[j].Name })
	m := &regionmap.Map{Version: 1, Servers: srvs, Replicas: l.Replicas, Replication: l.Replication, MinCopies: max(l.MinCopies, 1)}
	bounds := append(append([]string{""}, splits...), "")
	for i := 0; i+1 < len(bounds); i++ {
		r := regionmap.Assignment{ID: uint64(i + 1), Start: bounds[i], End: bounds[i+1], Epoch: 1, Primary: srvs[i%len(srvs)].Name}
		for j := 1; j < l.Replicas; j++ {
			r.Backups = append(r.Backups, srvs[(i+j)%len(srvs)].Name)
		}
		m.Regions = append(m.Regions, r)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// DigitSplits returns the n-1 keys splitting prefix+decimal digits into n
// ranges of about equal width: prefix+"3", prefix+"6" for n = 3 (two
// digits past 10 regions).
func DigitSplits(prefix string, n int) []string {
	var out []string
	width, scale := 1, 10
	if n > 10 {
		width, scale = 2, 100
	}
	for i := 1; i < n; i++ {
		out = append(out, fmt.Sprintf("%s%0*d", prefix, width, i*scale/n))
	}
	return out
}
