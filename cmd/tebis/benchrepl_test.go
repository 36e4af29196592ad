package main

import (
	"context"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestBenchReplicationRejectsRounds: a --rounds outside 1-20 is an error
// before any server starts.
func TestBenchReplicationRejectsRounds(t *testing.T) {
	for _, n := range []string{"0", "-1", "21"} {
		app := &cli.App{Commands: []*cli.Command{benchReplicationCommand()}}
		err := app.RunContext(context.Background(), []string{"tebis", "replication", "--rounds", n, "--dir", t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "--rounds") {
			t.Errorf("--rounds %s: %v, want an error naming --rounds", n, err)
		}
	}
}
