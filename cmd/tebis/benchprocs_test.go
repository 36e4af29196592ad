package main

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestBenchProcsDefaults: with a server the bench starts on this host,
// `bench engine` splits the cores between that server and itself, and
// `bench replication` gives each of its 3 servers and itself a quarter;
// a flag given wins, and with --server-map both stay Go's default.
func TestBenchProcsDefaults(t *testing.T) {
	ncpu := runtime.NumCPU()
	half, quarter := max(1, ncpu/2), max(1, ncpu/4)
	engine := func(args ...string) (server, client int) {
		t.Helper()
		app := &cli.App{Commands: []*cli.Command{{Name: "engine", Flags: []cli.Flag{
			&cli.StringFlag{Name: "server-map"}, &cli.IntFlag{Name: "server-procs"}, &cli.IntFlag{Name: "client-procs"},
		}, Action: func(c *cli.Context) error {
			server, client = benchProcs(c)
			return nil
		}}}}
		if err := app.RunContext(context.Background(), append([]string{"tebis", "engine"}, args...)); err != nil {
			t.Fatal(err)
		}
		return server, client
	}
	repl := func(args ...string) (server, client int) {
		t.Helper()
		app := &cli.App{Commands: []*cli.Command{{Name: "replication", Flags: replFlags(), Action: func(c *cli.Context) error {
			server, client = replProcs(c, "server-procs"), replProcs(c, "client-procs")
			return nil
		}}}}
		if err := app.RunContext(context.Background(), append([]string{"tebis", "replication"}, args...)); err != nil {
			t.Fatal(err)
		}
		return server, client
	}
	for _, tc := range []struct {
		name                   string
		wantServer, wantClient int
	}{
		{"engine default", half, max(1, ncpu-half)},
		{"engine --server-procs 3", 3, max(1, ncpu-3)},
		{"engine --server-procs 0", 0, 0},
		{"engine --client-procs 2", half, 2},
		{"engine --server-map m.yaml", 0, 0},
		{"replication default", quarter, quarter},
		{"replication --server-procs 2 --client-procs 0", 2, 0},
	} {
		var s, c int
		switch args := strings.Fields(tc.name); args[0] {
		case "engine":
			s, c = engine(args[1:]...)
		default:
			s, c = repl(args[1:]...)
		}
		if s != tc.wantServer || c != tc.wantClient {
			t.Errorf("%s: server procs %d, client procs %d; want %d, %d", tc.name, s, c, tc.wantServer, tc.wantClient)
		}
	}
}
