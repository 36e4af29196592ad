package zkserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// connect opens a client session to addrs and closes it when t ends.
func connect(t *testing.T, addrs ...string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(addrs, 4*time.Second, zk.WithLogger(testLogger{t}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type testLogger struct{ t *testing.T }

func (l testLogger) Printf(format string, args ...any) { l.t.Logf("zk: "+format, args...) }

// gone checks that the JVM is reaped and its client port closed.
func gone(t *testing.T, s *Server) {
	t.Helper()
	if err := syscall.Kill(s.PID(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d still exists (kill 0: %v)", s.PID(), err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections", s.Addr())
	}
}

func TestStandalone(t *testing.T) {
	t.Parallel()
	s := ForTest(t)
	mode, err := s.Mode(context.Background())
	if err != nil || mode != "standalone" {
		t.Fatalf("Mode = %q, %v; want standalone", mode, err)
	}
	c := connect(t, s.Addr())
	if _, err := c.Create("/tebis", []byte("hello"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if b, _, err := c.Get("/tebis"); err != nil || string(b) != "hello" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	c.Close()

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	gone(t, s)
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	// Same Dir and Port: the data survives a restart.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s2, err := Start(ctx, Config{Dir: s.Dir(), Port: s.Port()})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Stop()
	if b, _, err := connect(t, s2.Addr()).Get("/tebis"); err != nil || string(b) != "hello" {
		t.Fatalf("Get after restart = %q, %v", b, err)
	}
}

func TestKillPauseResume(t *testing.T) {
	t.Parallel()
	s := ForTest(t)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if mode, err := s.Mode(ctx); err == nil {
		t.Fatalf("paused server answered Mode %q", mode)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if mode, err := s.Mode(context.Background()); err != nil || mode != "standalone" {
		t.Fatalf("Mode after Resume = %q, %v", mode, err)
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	gone(t, s)
	if err := s.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop after Kill: %v", err)
	}
	if err := s.Pause(); !errors.Is(err, ErrExited) {
		t.Fatalf("Pause after Kill = %v, want ErrExited", err)
	}
}

func TestStopPaused(t *testing.T) {
	t.Parallel()
	s := ForTest(t)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	gone(t, s)
	if d := time.Since(start); d > stopGrace {
		t.Errorf("Stop of a paused server took %v; SIGTERM should have worked", d)
	}
}

func TestStartFailureQuotesLog(t *testing.T) {
	t.Parallel()
	requireInstalled(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := l.Addr().(*net.TCPAddr).Port
	s, err := Start(ctx, Config{Dir: t.TempDir(), Port: port})
	if err == nil {
		s.Stop()
		t.Fatal("Start on a taken port succeeded")
	}
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("Start on a taken port: %v", err)
	}
	t.Logf("the error reads: %v", err)
}

func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{
		{},
		{Dir: t.TempDir(), Port: -1},
		{Dir: t.TempDir(), MaxSessionTimeout: 100 * time.Millisecond},
	} {
		if s, err := Start(ctx, cfg); err == nil {
			s.Stop()
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
	if _, err := StartEnsemble(ctx, t.TempDir(), 1); err == nil {
		t.Error("StartEnsemble of 1 succeeded")
	}
}

func TestParseMode(t *testing.T) {
	out := "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n"
	if m, err := parseMode(out); err != nil || m != "follower" {
		t.Errorf("parseMode = %q, %v", m, err)
	}
	if _, err := parseMode("This ZooKeeper instance is not currently serving requests\n"); !errors.Is(err, ErrNotServing) {
		t.Errorf("parseMode(not serving) = %v", err)
	}
}

// fatalTB records Fatalf instead of failing the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no java
	if err := Installed(); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Installed without java = %v", err)
	}
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ForTest(f)
	}()
	<-done
	if !strings.Contains(f.msg, "make test") || !strings.Contains(f.msg, "zookeeper") {
		t.Fatalf("ForTest without java: %q", f.msg)
	}
	t.Logf("ForTest without java fails with: %s", f.msg)
}
