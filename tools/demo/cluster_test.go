package demo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/proctest"
	"github.com/tebis-go/tebis/internal/zkserver"
)

// needZooKeeper fails (never skips) the test when ZooKeeper is missing.
func needZooKeeper(t *testing.T) {
	t.Helper()
	if err := zkserver.Installed(); err != nil {
		t.Fatalf("%v: `make test` (make deps) installs the Debian zookeeper package", err)
	}
}

// alive reports whether process pid still runs (a zombie counts as gone:
// it has exited and waits only for its parent's reap).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b) // "pid (comm) state ...": the state follows the last ')'
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// checkGone fails unless every pid has exited (waiting up to 5 s for the
// reparented orphans of a process that just exited to be reaped).
func checkGone(t *testing.T, pids map[string]int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for name, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("%s (pid %d) still running", name, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// syncBuffer is an io.Writer safe for the workload's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestClusterDemo runs the whole cluster demo (ZooKeeper, a master and 3
// servers as processes, 3 regions with 3 replicas, a small load and Run
// A) and checks it reports its phases and leaves no process behind.
func TestClusterDemo(t *testing.T) {
	needZooKeeper(t)
	var out syncBuffer
	started := time.Now()
	var startedPIDs map[string]int
	res, err := RunCluster(context.Background(), ClusterConfig{
		Dir: t.TempDir(), Binary: proctest.Binary(t), Records: 3000, Ops: 3000, Threads: 3, Seed: testSeed(t),
		Started: func(c *Cluster) { startedPIDs = c.PIDs() },
		Out:     &out,
	})
	t.Logf("demo took %v; output:\n%s", time.Since(started).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted || res.Load.Ops != 3000 || res.Run.Ops != 3000 {
		t.Errorf("interrupted %v, load %d ops, run %d ops; want 3000 each", res.Interrupted, res.Load.Ops, res.Run.Ops)
	}
	if res.Run.Latency["read"].Count == 0 || res.Run.Latency["update"].Count == 0 || res.Load.Latency["insert"].Count != 3000 {
		t.Errorf("latencies: load %+v, run %+v", res.Load.Latency, res.Run.Latency)
	}
	if len(res.PIDs) != 5 || len(startedPIDs) != 5 {
		t.Errorf("pids %v (at start %v), want zookeeper, m1, rs1-rs3", res.PIDs, startedPIDs)
	}
	if res.Map == nil || len(res.Map.Regions) != 3 {
		t.Fatalf("map %+v, want 3 regions", res.Map)
	}
	for _, r := range res.Map.Regions {
		if len(r.Backups) != 2 {
			t.Errorf("region %d: primary %s, backups %v; want 2 backups", r.ID, r.Primary, r.Backups)
		}
	}
	for _, want := range []string{"cluster: up", "region 3", "load: 3000 inserts", "run A: 3000 operations", "p99",
		"kv --zookeeper " + res.ZooKeeper, "cluster status --zookeeper " + res.ZooKeeper, "cluster: stopped, no process left"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	checkGone(t, res.PIDs)
}

// TestClusterForceStop: once Force is closed, Stop kills every member at
// once instead of waiting for it, and none is left.
func TestClusterForceStop(t *testing.T) {
	needZooKeeper(t)
	force := make(chan struct{})
	c, err := StartCluster(context.Background(), ClusterConfig{Dir: t.TempDir(), Binary: proctest.Binary(t), Servers: 2, Replicas: 2, Force: force})
	if err != nil {
		t.Fatal(err)
	}
	pids := c.PIDs()
	close(force)
	start := time.Now()
	err = c.Stop()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("forced stop: %v, want members reported killed", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("forced stop took %v", took)
	}
	checkGone(t, pids)
}

// TestClusterDemoDirInUse: a second demo on the same directory is refused
// rather than wiping the running cluster's directory.
func TestClusterDemoDirInUse(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{cfg: ClusterConfig{Dir: dir}}
	if err := c.prepareDir(); err != nil {
		t.Fatal(err)
	}
	defer c.lock.Close()
	c2 := &Cluster{cfg: ClusterConfig{Dir: dir}}
	if err := c2.prepareDir(); !errors.Is(err, ErrDirInUse) {
		t.Errorf("second demo on %s: %v, want ErrDirInUse", dir, err)
	}
}

// TestClusterDemoInterrupt runs `tebis demo --cluster` with a long load,
// sends SIGINT once the cluster serves, and checks the demo stops the
// cluster and exits cleanly, soon, with no process left.
func TestClusterDemoInterrupt(t *testing.T) {
	needZooKeeper(t)
	cmd := exec.Command(proctest.Binary(t), "demo", "--cluster", "--dir", t.TempDir(), "--records", "50000000", "--exit")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var out syncBuffer
	up := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(&out, sc.Text())
			if strings.HasPrefix(sc.Text(), "workload:") {
				close(up)
			}
		}
	}()
	go func() {
		<-copied
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
		}
	})
	select {
	case <-up:
	case err := <-done:
		t.Fatalf("demo exited before the cluster was up: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("cluster not up after 60s")
	}
	pids := map[string]int{}
	for _, m := range regexp.MustCompile(`(zookeeper|m1|rs\d+) +pid (\d+)`).FindAllStringSubmatch(out.String(), -1) {
		pids[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(pids) != 5 {
		t.Fatalf("pids %v, want zookeeper, m1, rs1-rs3", pids)
	}
	time.Sleep(500 * time.Millisecond) // well into the load
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo exited with %v after SIGINT", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo still running 30s after SIGINT")
	}
	t.Logf("exited %v after SIGINT", time.Since(sent).Round(time.Millisecond))
	for _, want := range []string{"cluster: stopping", "demo: interrupted; the cluster stopped cleanly"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "\nload: ") {
		t.Error("the load finished: the interrupt came too late to test")
	}
	checkGone(t, pids)
}
