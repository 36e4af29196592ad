package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// runHealth runs `tebis cluster health` against ZooKeeper at zk: stdout,
// stderr as main would print it, and the exit status.
func runHealth(t *testing.T, zk string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.RunContext(context.Background(), []string{"tebis", "--log-level", "error", "cluster", "health", "--zookeeper", zk, "--timeout", "1s"})
	if err != nil {
		fmt.Fprintln(&errOut, "tebis:", err)
	}
	return out.String(), errOut.String(), exitStatus(err)
}

// TestClusterHealth: on a running cluster every endpoint is healthy and
// ready (status 0); with a server down, its absence is reported and the
// status is 1.
func TestClusterHealth(t *testing.T) {
	c := startTestCluster(t, 3, 3)
	out, errOut, status := runHealth(t, c.zk.Addr())
	if status != 0 {
		t.Fatalf("healthy cluster: status %d\n%s%s", status, out, errOut)
	}
	for _, name := range []string{"rs1", "rs2", "rs3"} {
		want := fmt.Sprintf("server %s http://%s: healthy, ready\n", name, c.servers[name].HTTPAddr())
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	if want := fmt.Sprintf("master m1 http://%s: healthy, ready: leader\n", c.masterHTTP()); !strings.Contains(out, want) {
		t.Errorf("no line %q in:\n%s", want, out)
	}
	if !strings.HasSuffix(out, "all healthy and ready\n") {
		t.Errorf("no verdict at the end of:\n%s", out)
	}

	c.stop("rs3")
	c.waitFailover("rs3")
	out, errOut, status = runHealth(t, c.zk.Addr())
	if status != exitUnhealthy || !strings.Contains(out, "server rs3: in the region map") || !strings.Contains(out, "NOT REGISTERED") ||
		!strings.Contains(errOut, "not healthy and ready") || strings.Contains(out, "all healthy") {
		t.Fatalf("with rs3 down: status %d\n%s%s", status, out, errOut)
	}
	t.Logf("with rs3 down:\n%s", out)
}
