package client

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
)

// statsServer serves TypeStats at addr, answering body.
func statsServer(t *testing.T, addr, body string) *ring.Server {
	t.Helper()
	s, err := ring.Listen(ring.ServerConfig{Transport: &rdma.TCP{}, Addr: addr, Handlers: map[uint16]ring.HandlerFunc{
		wire.TypeStats: func(*ring.ServerRequest) ring.Reply { return ring.Reply{Payload: []byte(body)} },
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestServerStatsAfterServerRestart: after the server's process is
// replaced (its connection broken), ServerStats reaches the new run
// instead of failing on the dead connection forever.
func TestServerStatsAfterServerRestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s1 := statsServer(t, addr, "run 1")
	m := &regionmap.Map{Version: 1, Servers: []regionmap.Server{{Name: "rs1", TCP: addr}}, Regions: []regionmap.Assignment{{ID: 1, Primary: "rs1", Epoch: 1}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := Open(ctx, Config{Map: regionmap.Static{M: m}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if b, err := cl.ServerStats(ctx, "rs1"); err != nil || string(b) != "run 1" {
		t.Fatalf("stats %q, %v", b, err)
	}
	s1.Close()
	s2 := statsServer(t, addr, "run 2")
	defer s2.Close()
	var got string
	for try := 0; try < 50 && got != "run 2"; try++ {
		cc, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		b, err := cl.ServerStats(cc, "rs1")
		cancel()
		if err == nil {
			got = string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "run 2" {
		t.Fatalf("ServerStats never reached the restarted server (last answer %q)", got)
	}
}
