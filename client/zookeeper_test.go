package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/zkserver"
)

// TestDialZooKeeperAuth: a cluster whose znodes were created with a
// credential gives its map to a client with that credential only.
func TestDialZooKeeperAuth(t *testing.T) {
	zs := zkserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const root, cred = "/acl", "tebis:pw"
	admin, err := coord.Dial(ctx, coord.Config{Servers: []string{zs.Addr()}, Root: root, Auth: cred})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	srv := regionmap.Server{Name: "rs1", TCP: "127.0.0.1:1"}
	if err := admin.CreateMap(ctx, regionmap.Single(srv)); err != nil {
		t.Fatal(err)
	}

	z, err := DialZooKeeper(ctx, zs.Addr(), root, nil, ZooKeeperAuth(cred))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	m, err := z.Load(ctx)
	if err != nil || len(m.Servers) != 1 || m.Servers[0].Name != "rs1" {
		t.Fatalf("load with the credential: %v, %v", m, err)
	}

	for _, c := range []struct{ name, cred string }{{"none", ""}, {"wrong", "tebis:nope"}} {
		z, err := DialZooKeeper(ctx, zs.Addr(), root, nil, ZooKeeperAuth(c.cred))
		if err != nil {
			t.Fatal(err)
		}
		m, err := z.Load(ctx)
		z.Close()
		if !errors.Is(err, ErrZooKeeperAuth) {
			t.Errorf("credential %s: load %v, %v; want %v", c.name, m, err, ErrZooKeeperAuth)
		}
	}
	if _, err := DialZooKeeper(ctx, zs.Addr(), root, nil, ZooKeeperAuth("no-colon")); !errors.Is(err, ErrZooKeeperAuth) {
		t.Errorf("malformed credential: %v, want %v", err, ErrZooKeeperAuth)
	}
}
