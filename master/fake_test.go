package master

import (
	"sync"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/coord/coordtest"
)

var _ Coordinator = (*coordtest.Coordinator)(nil)

// newFake is an in-memory coordinator with map m (nil: none) and the
// servers live registered (srv, run 1).
func newFake(m *regionmap.Map, live ...string) *coordtest.Coordinator {
	var infos []coord.ServerInfo
	for _, n := range live {
		infos = append(infos, coord.ServerInfo{Server: srv(n), Started: 1})
	}
	return coordtest.New(m, infos)
}

// clock is a fake clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
