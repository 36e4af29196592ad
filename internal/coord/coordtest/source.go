package coordtest

import (
	"context"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// Source returns the Coordinator's map as a client sees it: Load returns
// the current map (coord.ErrNoMap if none).
func (c *Coordinator) Source() regionmap.Source { return source{c} }

type source struct{ c *Coordinator }

func (s source) Load(context.Context) (*regionmap.Map, error) {
	m, _ := s.c.Map()
	if m == nil {
		return nil, coord.ErrNoMap
	}
	return m, nil
}
