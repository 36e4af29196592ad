package rdma_test

import (
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/internal/conformance"
)

var loopNames atomic.Uint64

func TestLoopbackConformance(t *testing.T) {
	conformance.Run(t, conformance.Env{
		Transport:       rdma.NewLoopback(),
		Addr:            func(*testing.T) string { return fmt.Sprintf("loop-%d", loopNames.Add(1)) },
		DeadWithin:      300 * time.Millisecond,
		ViewHoldsWrites: true,
		CompletesOnPost: true,
	})
}

func TestShmConformance(t *testing.T) {
	conformance.Run(t, conformance.Env{
		Transport:       &rdma.Shm{},
		Addr:            func(t *testing.T) string { return filepath.Join(t.TempDir(), "s") },
		DeadWithin:      300 * time.Millisecond,
		CompletesOnPost: true,
	})
}

func TestTCPConformance(t *testing.T) {
	conformance.Run(t, conformance.Env{
		Transport:       &rdma.TCP{DeadAfter: 300 * time.Millisecond},
		Addr:            func(*testing.T) string { return net.JoinHostPort("127.0.0.1", "0") },
		DeadWithin:      300 * time.Millisecond,
		ViewHoldsWrites: true,
	})
}
