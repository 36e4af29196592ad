package main

import (
	"context"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// flagsOf returns the flags of `tebis bench NAME`.
func flagsOf(t *testing.T, name string) []cli.Flag {
	t.Helper()
	for _, c := range benchCommand().Subcommands {
		if c.Name == name {
			return c.Flags
		}
	}
	t.Fatalf("no bench %s command", name)
	return nil
}

// runFlags parses args with flags and calls f on the context.
func runFlags(t *testing.T, flags []cli.Flag, args string, f func(c *cli.Context)) {
	t.Helper()
	app := &cli.App{Commands: []*cli.Command{{Name: "x", Flags: flags, Action: func(c *cli.Context) error {
		f(c)
		return nil
	}}}}
	if err := app.RunContext(context.Background(), append([]string{"tebis", "x"}, strings.Fields(args)...)); err != nil {
		t.Fatal(err)
	}
}

// TestBenchProcsDefaults: with a server the bench starts on this host,
// `bench engine` and `bench ycsb` split this process's Ps between that
// server and itself, and `bench replication` gives each of its 3 servers
// and itself a quarter; a flag given wins; against running servers no
// server procs are set and this process's are left alone unless asked.
func TestBenchProcsDefaults(t *testing.T) {
	for _, tc := range []struct {
		cmd, args              string
		cores                  int
		wantServer, wantClient int
	}{
		{"engine", "", 8, 4, 4},
		{"engine", "", 2, 1, 1},
		{"engine", "", 1, 1, 1},
		{"engine", "--server-procs 3", 8, 3, 5},
		{"engine", "--server-procs 0", 8, 0, 0},
		{"engine", "--client-procs 2", 8, 4, 2},
		{"engine", "--server-map m.yaml", 8, 0, 0},
		{"engine", "--server-map m.yaml --server-procs 3 --client-procs 2", 8, 0, 2},
		{"ycsb", "--target server", 8, 4, 4},
		{"ycsb", "--target cluster --map m.yaml", 8, 0, 0},
		{"replication", "", 8, 2, 2},
		{"replication", "", 2, 1, 1},
		{"replication", "--server-procs 3 --client-procs 0", 8, 3, 0},
		{"curves", "--out o", 16, 4, 4},
	} {
		var s, c int
		runFlags(t, flagsOf(t, tc.cmd), tc.args, func(ctx *cli.Context) {
			switch tc.cmd {
			case "engine":
				s, c = benchProcs(ctx, tc.cores, engineStartsServer(ctx))
			case "ycsb":
				s, c = benchProcs(ctx, tc.cores, ycsbStartsServer(ctx))
			default:
				s, c = replProcs(ctx, "server-procs", tc.cores), replProcs(ctx, "client-procs", tc.cores)
			}
		})
		if s != tc.wantServer || c != tc.wantClient {
			t.Errorf("bench %s %s on %d Ps: server procs %d, client procs %d; want %d, %d", tc.cmd, tc.args, tc.cores, s, c, tc.wantServer, tc.wantClient)
		}
	}
}
