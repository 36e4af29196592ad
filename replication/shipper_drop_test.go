package replication

import (
	"fmt"
	"testing"

	"github.com/tebis-go/tebis/rdma"
)

// TestClosedByPeer: a backup whose server said goodbye was stopped on
// purpose; one lost without a goodbye, or failing otherwise, was not.
func TestClosedByPeer(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("replication: backup rs1: %w", rdma.ErrPeerGone), true},
		{fmt.Errorf("replication: backup rs1: %w", rdma.ErrPeerLost), false},
		{fmt.Errorf("replication: backup rs1: %w", ErrBackupHung), false},
		{rdma.ErrAccess, false},
	} {
		if got := closedByPeer(c.err); got != c.want {
			t.Errorf("closedByPeer(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
