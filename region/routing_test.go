package region

import (
	"testing"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
	"go.uber.org/zap"
)

// TestRouteServedAllocatesNothing: routing a request of a served region
// of a large map allocates nothing and finds the region's assignment; a
// request of a region the server does not host is answered WRONG_REGION
// at the map's version.
func TestRouteServedAllocatesNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name = "a"
	m := &regionmap.Map{Version: 9}
	routes := map[uint64]route{}
	er := &engine.Region{}
	for id := uint64(1); id <= 300; id++ {
		m.Regions = append(m.Regions, regionmap.Assignment{ID: id, Primary: "a", Epoch: 9})
		routes[id] = route{er: er, how: routeServed}
	}
	m.Regions = append(m.Regions, regionmap.Assignment{ID: 301, Primary: "b", Epoch: 9})
	s := &Server{cfg: cfg, log: zap.NewNop()}
	s.state.Store(newRouting(m, routes))

	req := &ring.ServerRequest{Header: ring.Header{Region: 300}}
	got, mr, rej := s.routeUncounted(req, 9)
	if rej != nil || got != er || mr == nil || mr.ID != 300 {
		t.Fatalf("route of region 300: handle %p, assignment %+v, refusal %+v", got, mr, rej)
	}
	if n := testing.AllocsPerRun(100, func() { s.routeUncounted(req, 9) }); n != 0 {
		t.Errorf("routing a served region allocates %.0f times", n)
	}
	req.Region = 301
	if _, _, rej := s.routeUncounted(req, 9); rej == nil || rej.Status != wire.StatusWrongRegion {
		t.Fatalf("region 301 (primary b): %+v, want WRONG_REGION", rej)
	}
}
