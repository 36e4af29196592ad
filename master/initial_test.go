package master

import (
	"errors"
	"testing"

	"github.com/tebis-go/tebis/client/regionmap"
)

func TestInitialMapMinCopies(t *testing.T) {
	srvs := []regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}
	for _, c := range []struct{ replicas, min, want int }{{3, 0, 1}, {3, 1, 1}, {3, 3, 3}, {2, 2, 2}} {
		m, err := InitialMap(srvs, Layout{Regions: 2, Replicas: c.replicas, MinCopies: c.min})
		if err != nil || m.MinCopies != c.want {
			t.Errorf("replicas %d min copies %d: %+v, %v; want min_copies %d", c.replicas, c.min, m, err, c.want)
		}
	}
	for _, c := range []struct{ replicas, min int }{{3, 4}, {1, 2}, {2, -1}} {
		if _, err := InitialMap(srvs, Layout{Regions: 2, Replicas: c.replicas, MinCopies: c.min}); !errors.Is(err, regionmap.ErrInvalid) {
			t.Errorf("replicas %d min copies %d: %v, want ErrInvalid", c.replicas, c.min, err)
		}
	}
}
