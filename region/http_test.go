package region

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// get fetches path from the server's HTTP endpoints: status and body.
func get(t *testing.T, s *Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// wantAnswer checks path answers status with a body holding want.
func wantAnswer(t *testing.T, s *Server, path string, status int, want string) {
	t.Helper()
	if code, body := get(t, s, path); code != status || !strings.Contains(body, want) {
		t.Fatalf("GET %s: %d %q, want %d and %q", path, code, body, status, want)
	}
}

// TestHTTPHealthAndReadiness: a serving server is healthy and ready; out
// of space it is neither (503 naming the volume's state), and both again
// once space returns; closed, it no longer listens.
func TestHTTPHealthAndReadiness(t *testing.T) {
	mem := vfs.NewMem()
	room := vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30}
	mem.TestingSetDiskUsage(room)
	s, cl := loneServer(t, t.TempDir(), func(c *Config) { c.GrowStep, c.HTTP = 256<<10, "127.0.0.1:0" }, WithFS(mem))
	if s.HTTPAddr() == "" || strings.HasSuffix(s.HTTPAddr(), ":0") {
		t.Fatalf("HTTP address %q", s.HTTPAddr())
	}
	wantAnswer(t, s, "/healthz", http.StatusOK, "ok")
	wantAnswer(t, s, "/readyz", http.StatusOK, "ready")

	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 16 << 20, TotalBytes: 2 << 30, UsedBytes: 2<<30 - 16<<20})
	n, err := fillServer(t, cl, 0, map[int]string{})
	wantStorage(t, err, fmt.Sprintf("put %d on a full disk", n), "no space")
	waitHealth(t, s, "no-space")
	wantAnswer(t, s, "/healthz", http.StatusServiceUnavailable, "volume no-space")
	wantAnswer(t, s, "/readyz", http.StatusServiceUnavailable, "volume no-space")

	mem.TestingSetDiskUsage(room)
	waitHealth(t, s, "ok")
	wantAnswer(t, s, "/healthz", http.StatusOK, "ok")
	wantAnswer(t, s, "/readyz", http.StatusOK, "ready")

	addr := s.HTTPAddr()
	s.Close()
	c := http.Client{Timeout: 2 * time.Second}
	if resp, err := c.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a closed server still answers: %s", resp.Status)
	}
}

// TestHTTPNotReadyWhileAttaching: a primary none of whose backups answers
// is healthy but not ready, naming the region; once its backup is up and
// the region attached, it is ready.
func TestHTTPNotReadyWhileAttaching(t *testing.T) {
	dir := t.TempDir()
	start := staticServersWith(t, dir, pairMap(dir), 200*time.Millisecond, nil, func(c *Config) {
		if c.Name == "p" {
			c.HTTP = "127.0.0.1:0"
		}
	})
	p := start("p") // b is not running: the attach finds no backup
	wantAnswer(t, p, "/healthz", http.StatusOK, "ok")
	wantAnswer(t, p, "/readyz", http.StatusServiceUnavailable, "regions waiting for their backups: [1]")
	start("b")
	deadline := time.Now().Add(10 * time.Second) // the re-attach tick (1 s)
	for {
		code, body := get(t, p, "/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 10 s after its backup started: %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHTTPAnswersWhileStarting: the endpoints answer from before Start
// returns: a standalone primary whose backup does not answer spends
// ReplicationConnect attaching, healthy and not ready meanwhile.
func TestHTTPAnswersWhileStarting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String() // a free port, for the server to take
	ln.Close()
	dir := t.TempDir()
	start := staticServersWith(t, dir, pairMap(dir), 3*time.Second, nil, func(c *Config) { c.HTTP = addr })
	started := make(chan *Server, 1)
	go func() { started <- start("p") }()
	c := http.Client{Timeout: 2 * time.Second}
	probe := func(path string) (int, string) {
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		select {
		case <-started:
			t.Fatal("Start returned before its endpoints answered")
		default:
		}
		if code, _ := probe("/healthz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer from /healthz 2 s into Start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := probe("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while starting: %d %q, want 503", code, body)
	}
	<-started
}

// TestAdvertisedHTTP: a wildcard HTTP listen address registers with the
// tcp address's host (it would name the reader's own host); a specific
// one, or a wildcard tcp address, registers as it listens.
func TestAdvertisedHTTP(t *testing.T) {
	for _, c := range []struct{ listen, tcp, want string }{
		{"[::]:9090", "198.18.0.11:7070", "198.18.0.11:9090"},
		{"0.0.0.0:9090", "tebis1:7070", "tebis1:9090"},
		{"127.0.0.1:9090", "198.18.0.11:7070", "127.0.0.1:9090"},
		{"[::]:9090", "0.0.0.0:7070", "[::]:9090"},
		{"[::]:9090", "", "[::]:9090"},
		{"198.18.0.12:9090", "", "198.18.0.12:9090"},
	} {
		if got := advertisedHTTP(c.listen, c.tcp); got != c.want {
			t.Errorf("advertisedHTTP(%q, %q) = %q, want %q", c.listen, c.tcp, got, c.want)
		}
	}
}
