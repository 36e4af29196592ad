package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/zkserver"
	"github.com/tebis-go/tebis/master"
)

// runTebis runs `tebis args...` and returns stdout, stderr as main
// prints it, and the exit status.
func runTebis(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	app.ExitErrHandler = func(*cli.Context, error) {} // main maps errors to statuses
	err := app.RunContext(context.Background(), append([]string{"tebis"}, args...))
	if err != nil {
		fmt.Fprintln(&errOut, "tebis:", err)
	}
	return out.String(), errOut.String(), exitStatus(err)
}

// adminCluster is a real ZooKeeper with a master running on it and four
// registered servers whose part (release and log reports for moves,
// join reports for joining backups) a goroutine plays from the map.
type adminCluster struct {
	t    *testing.T
	addr string
	root string
	sess *coord.Session
}

func startAdminCluster(t *testing.T) *adminCluster {
	zs := zkserver.ForTest(t)
	a := &adminCluster{t: t, addr: zs.Addr(), root: "/admin-test"}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a.sess = a.dial(ctx)
	var srvs []regionmap.Server
	for i := range 4 {
		name := fmt.Sprintf("rs%d", i+1)
		s := a.dial(ctx)
		si := coord.ServerInfo{Server: regionmap.Server{Name: name, Shm: "/nowhere/" + name}, Started: 1}
		if err := s.Register(ctx, si); err != nil {
			t.Fatal(err)
		}
		srv := si.Server
		srv.Started = 1
		srvs = append(srvs, srv)
	}
	m, err := master.InitialMap(srvs, master.Layout{Regions: 3, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.sess.CreateMap(ctx, m); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = master.Run(ctx, master.Config{Name: "m", Session: a.dial(ctx), Recheck: 50 * time.Millisecond, Grace: time.Second,
			LogWait: 200 * time.Millisecond, DropHold: 100 * time.Millisecond})
	}()
	go a.sess.WatchMap(ctx, func(m *regionmap.Map) { a.servers(ctx, m) }, nil)
	t.Cleanup(func() { cancel(); <-done })
	return a
}

func (a *adminCluster) dial(ctx context.Context) *coord.Session {
	a.t.Helper()
	s, err := coord.Dial(ctx, coord.Config{Servers: []string{a.addr}, Root: a.root, SessionTimeout: 4 * time.Second, Log: zap.NewNop()})
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { s.Close() })
	return s
}

// servers plays the region servers' part for map m: a moving region's
// primary releases it and its backups report complete copies; joining
// backups are reported done.
func (a *adminCluster) servers(ctx context.Context, m *regionmap.Map) {
	for _, r := range m.Regions {
		var rs []coord.Report
		if r.MoveTo != "" {
			rs = append(rs, coord.ReleaseReport{Region: r.ID, Epoch: r.Epoch, Server: r.Primary})
			for _, b := range r.Backups {
				rs = append(rs, coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: b, Complete: true})
			}
		}
		for _, j := range r.Joining {
			rs = append(rs, coord.JoinReport{Region: r.ID, Epoch: r.Epoch, Server: j})
		}
		for _, rep := range rs {
			if err := a.sess.Report(ctx, rep); err != nil && ctx.Err() == nil {
				a.t.Errorf("report %+v: %v", rep, err)
			}
		}
	}
}

func (a *adminCluster) tebis(args ...string) (string, string, int) {
	a.t.Helper()
	// Flags go before the arguments: `tebis cluster CMD [flags] ARGS`.
	full := append([]string{"--log-level", "error"}, args[:2]...)
	full = append(full, "--zookeeper", a.addr, "--zk-root", a.root)
	return runTebis(a.t, append(full, args[2:]...)...)
}

func (a *adminCluster) readMap() *regionmap.Map {
	a.t.Helper()
	m, _, err := a.sess.ReadMap(context.Background())
	if err != nil {
		a.t.Fatal(err)
	}
	return m
}

// TestClusterMoveDrainCommands drives move-primary, drain, undrain and
// rebalance against a real ZooKeeper and master: each waits for the map
// to show it done and says so; refused requests say why.
func TestClusterMoveDrainCommands(t *testing.T) {
	a := startAdminCluster(t)
	m := a.readMap()
	r := m.Regions[0]
	target := r.Backups[1]
	out, errOut, status := a.tebis("cluster", "move-primary", fmt.Sprint(r.ID), target)
	if status != 0 || !strings.Contains(out, fmt.Sprintf("primary %s at epoch", target)) {
		t.Fatalf("move-primary: status %d, stdout %q, stderr %q", status, out, errOut)
	}
	if got := a.readMap().Region(r.ID); got.Primary != target || !slices.Contains(got.Group(), r.Primary) {
		t.Fatalf("after move-primary: %+v", got)
	}
	var outsider string
	for _, s := range m.Servers {
		if got := a.readMap().Region(r.ID); s.Name != got.Primary && !slices.Contains(got.Group(), s.Name) {
			outsider = s.Name
		}
	}
	if _, errOut, status := a.tebis("cluster", "move-primary", fmt.Sprint(r.ID), outsider); status != 1 || !strings.Contains(errOut, "is not one of its backups") {
		t.Errorf("a move to %s, not in the group: status %d, stderr %q", outsider, status, errOut)
	}
	if _, errOut, status := a.tebis("cluster", "move-primary", "x", target); status != 2 {
		t.Errorf("a move of region x: status %d, stderr %q", status, errOut)
	}

	out, errOut, status = a.tebis("cluster", "drain", "rs1")
	if status != 0 || !strings.Contains(out, "rs1 drained after") {
		t.Fatalf("drain: status %d, stdout %q, stderr %q", status, out, errOut)
	}
	for _, reg := range a.readMap().Regions {
		if reg.Primary == "rs1" || slices.Contains(reg.Group(), "rs1") || len(reg.Backups) != 2 {
			t.Fatalf("after the drain: region %+v", reg)
		}
	}
	out, _, _ = a.tebis("cluster", "status")
	if !strings.Contains(out, "drained: rs1") {
		t.Errorf("status does not show the drain:\n%s", out)
	}
	if out, errOut, status := a.tebis("cluster", "undrain", "rs1"); status != 0 || !strings.Contains(out, "undrained") {
		t.Fatalf("undrain: status %d, stdout %q, stderr %q", status, out, errOut)
	}
	out, errOut, status = a.tebis("cluster", "rebalance")
	if status != 0 || !strings.Contains(out, "primaries after") {
		t.Fatalf("rebalance: status %d, stdout %q, stderr %q", status, out, errOut)
	}
	t.Logf("rebalance:\n%s", out)
}
