package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// ServerStats returns a server's counters as the JSON document the server
// sends (region.ServerStats). A broken connection is forgotten, so a
// call after the server restarted reaches its new run.
func (c *Client) ServerStats(ctx context.Context, server string) ([]byte, error) {
	rc, err := c.conn(ctx, c.Map(), server)
	if err != nil {
		return nil, err
	}
	rep, err := rc.Call(ctx, ring.Request{Type: wire.TypeStats, ReplySize: 16 << 10})
	if errors.Is(err, ring.ErrClosed) {
		c.drop(server, rc) // the server restarted (or went): the next call redials
	}
	if err != nil {
		return nil, fmt.Errorf("%w: server %s: %w", ErrUnavailable, server, err)
	}
	if err := statusErr(rep); err != nil {
		return nil, err
	}
	return rep.Payload, nil
}
