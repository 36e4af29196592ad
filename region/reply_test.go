package region

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/replication"
)

// TestEngineReplyStatus: the status a write's error is answered with. A
// write whose stream closed or whose backup connection failed is
// UNAVAILABLE (the client retries at the next primary), never INTERNAL.
func TestEngineReplyStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want uint16
	}{
		{engine.ErrNotFound, wire.StatusNotFound},
		{engine.ErrKeyTooLarge, wire.StatusTooLarge},
		{engine.ErrStaleRequest, wire.StatusBadRequest},
		{engine.ErrClosed, wire.StatusUnavailable},
		{replication.ErrNoBackups, wire.StatusUnavailable},
		{replication.ErrBackupDropped, wire.StatusUnavailable},
		{replication.ErrTooFewCopies, wire.StatusUnavailable},
		{fmt.Errorf("replication: the mirror closed while a write waited: %w", replication.ErrStreamClosed), wire.StatusUnavailable},
		{fmt.Errorf("replication: backup b1: %w", rdma.ErrClosed), wire.StatusUnavailable},
		{fmt.Errorf("replication: backup b1: %w", rdma.ErrPeerGone), wire.StatusUnavailable},
		{errors.New("something else"), wire.StatusInternal},
	} {
		if got := engineReply(tc.err).Status; got != tc.want {
			t.Errorf("engineReply(%v) = status %d, want %d", tc.err, got, tc.want)
		}
	}
}
