package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
)

// Full or failing disks, through the server (docs/operations.md): a
// server whose volume cannot store writes refuses them with the storage
// status (client.ErrStorage, naming the server), serves reads, reports
// itself unhealthy in its stats, and, once space returns, takes writes
// again; nothing acknowledged is lost, also across a restart.

// loneServer starts a standalone server "p" serving one region over all
// keys in dir, with edit applied to its configuration and opts given to
// Start, and a client.
func loneServer(t *testing.T, dir string, edit func(*Config), opts ...Option) (*Server, *client.Client) {
	t.Helper()
	m := &regionmap.Map{Version: 1, Servers: []regionmap.Server{{Name: "p", Shm: filepath.Join(dir, "p.sock")}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Epoch: 1}}}
	mapFile := filepath.Join(dir, "map.yaml")
	if err := regionmap.WriteFile(mapFile, m); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm, cfg.MapFile = "p", filepath.Join(dir, "p"), "", filepath.Join(dir, "p.sock"), mapFile
	cfg.SegmentSize, cfg.L0Pairs, cfg.GrowthFactor, cfg.SyncMode = 64<<10, 256, 2, "sync"
	if edit != nil {
		edit(&cfg)
	}
	s, err := Start(cfg, zaptest.NewLogger(t).Named("p"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cl, err := client.Open(context.Background(), client.Config{Map: regionmap.Static{M: m}, Transport: "shm", RetryWindow: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return s, cl
}

func dkey(i int) []byte { return fmt.Appendf(nil, "key%07d", i) }

// fillServer puts 2 KiB values until a put fails; it records the
// acknowledged ones.
func fillServer(t *testing.T, cl *client.Client, from int, acked map[int]string) (int, error) {
	t.Helper()
	for i := from; i < from+100000; i++ {
		v := fmt.Sprintf("%02048d", i)
		if err := cl.Put(context.Background(), dkey(i), []byte(v)); err != nil {
			return i, err
		}
		acked[i] = v
	}
	t.Fatal("the volume never filled")
	return 0, nil
}

func readAcked(t *testing.T, cl *client.Client, acked map[int]string, what string) {
	t.Helper()
	for i, v := range acked {
		got, err := cl.Get(context.Background(), dkey(i))
		if err != nil || string(got) != v {
			t.Fatalf("%s: acknowledged key %d: %.20q %v", what, i, got, err)
		}
	}
}

func serverHealth(t *testing.T, s *Server) ServerStats {
	t.Helper()
	b, err := json.Marshal(s.Stats())
	if err != nil {
		t.Fatal(err)
	}
	var st ServerStats
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitHealth waits until the server's stats report state.
func waitHealth(t *testing.T, s *Server, state string) ServerStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := serverHealth(t, s)
		if st.Health == state {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("health %q (%s), want %q", st.Health, st.HealthError, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantStorage checks that err is the storage refusal of server p.
func wantStorage(t *testing.T, err error, what, state string) {
	t.Helper()
	if !errors.Is(err, client.ErrStorage) || !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "server p") ||
		!strings.Contains(err.Error(), state) {
		t.Fatalf("%s: %v, want client.ErrStorage from server p (%s)", what, err, state)
	}
}

// TestServerDiskFullRefusesWritesThenResumes: the file system runs out of
// space (the volume's growth would eat the metadata reserve): writes fail
// with the storage status, reads go on, the stats say no-space; once the
// file system has room the server probes, finds it, and takes writes
// again; a restart finds every acknowledged write.
func TestServerDiskFullRefusesWritesThenResumes(t *testing.T) {
	dir := t.TempDir()
	mem := vfs.NewMem()
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30})
	edit := func(c *Config) { c.GrowStep = 256 << 10 }
	s, cl := loneServer(t, dir, edit, WithFS(mem))
	acked := map[int]string{}
	for i := range 200 {
		acked[i] = fmt.Sprintf("%02048d", i)
		if err := cl.Put(context.Background(), dkey(i), []byte(acked[i])); err != nil {
			t.Fatal(err)
		}
	}
	// Full: no more than the reserve is free.
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 16 << 20, TotalBytes: 2 << 30, UsedBytes: 2<<30 - 16<<20})
	n, err := fillServer(t, cl, 200, acked)
	wantStorage(t, err, fmt.Sprintf("put %d on a full disk", n), "no space")
	st := waitHealth(t, s, "no-space")
	t.Logf("full after %d puts: %v; stats: %s (%s)", n, err, st.Health, st.HealthError)
	wantStorage(t, cl.Put(context.Background(), dkey(n), []byte("x")), "put while unhealthy", "no-space")
	readAcked(t, cl, acked, "disk full")

	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30})
	waitHealth(t, s, "ok")
	for i := n; i < n+300; i++ {
		acked[i] = fmt.Sprintf("again %d", i)
		if err := cl.Put(context.Background(), dkey(i), []byte(acked[i])); err != nil {
			t.Fatalf("put %d after space returned: %v", i, err)
		}
	}
	readAcked(t, cl, acked, "space returned")
	cl.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, cl = loneServer(t, dir, edit, WithFS(mem))
	readAcked(t, cl, acked, "restarted")
}

// TestServerDiskEIORefusesWritesServesReads: the segment file's writes
// fail with EIO (fault-fs): writes fail with the storage status and keep
// failing after the device answers again (the volume failed: a restart
// recovers it), reads of what was stored go on, the stats say failed; the
// restarted server has every acknowledged write and takes new ones.
func TestServerDiskEIORefusesWritesServesReads(t *testing.T) {
	dir := t.TempDir()
	edit := func(c *Config) { c.FaultFS = true }
	s, cl := loneServer(t, dir, edit)
	acked := map[int]string{}
	for i := range 1500 { // a few compactions: levels and L0
		acked[i] = fmt.Sprintf("v%d", i)
		if err := cl.Put(context.Background(), dkey(i), []byte(acked[i])); err != nil {
			t.Fatal(err)
		}
	}
	fault := filepath.Join(dir, "p", FaultFile)
	if err := os.WriteFile(fault, []byte("eio-segments\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for i := 1500; ; i++ {
		if err = cl.Put(context.Background(), dkey(i), []byte("lost")); err != nil {
			break
		}
		acked[i] = "lost" // acknowledged before the fault took effect
		if time.Now().After(deadline) {
			t.Fatal("puts still succeed with the segment file failing")
		}
	}
	wantStorage(t, err, "put with EIO", "input/output error")
	st := waitHealth(t, s, "failed")
	t.Logf("stats: %s (%s)", st.Health, st.HealthError)
	readAcked(t, cl, acked, "failing disk")
	if err := os.Remove(fault); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * faultPoll)
	wantStorage(t, cl.Put(context.Background(), dkey(99999), []byte("x")), "put after the device answers again", "failed")
	if ok, _ := s.Healthy(); ok {
		t.Fatal("a failed volume reported healthy without a restart")
	}
	cl.Close()
	s.Close() // may report the failure
	_, cl = loneServer(t, dir, edit)
	readAcked(t, cl, acked, "restarted")
	if err := cl.Put(context.Background(), dkey(99999), []byte("x")); err != nil {
		t.Fatalf("put after the restart: %v", err)
	}
}

// TestServerTmpfsFull: the data directory on a small tmpfs (root only):
// writes fail with the storage status once the file system is full, reads
// go on; after a filler file is removed the server takes writes again.
func TestServerTmpfsFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "p")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Logf("umount: %v %s", err, out)
		}
	})
	// A filler takes most of the file system, as other data would.
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 20<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	s, cl := loneServer(t, dir, func(c *Config) { c.GrowStep = 1 << 20 })
	acked := map[int]string{}
	n, err := fillServer(t, cl, 0, acked)
	wantStorage(t, err, fmt.Sprintf("put %d on a full tmpfs", n), "no space")
	waitHealth(t, s, "no-space")
	readAcked(t, cl, acked, "tmpfs full")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, s, "ok")
	for i := n; i < n+100; i++ {
		acked[i] = "again"
		if err := cl.Put(context.Background(), dkey(i), []byte(acked[i])); err != nil {
			t.Fatalf("put %d after space returned: %v", i, err)
		}
	}
	readAcked(t, cl, acked, "space returned")
}
