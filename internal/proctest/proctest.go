// Package proctest runs the tebis binary as real child processes in tests
// (with internal/child): it builds cmd/tebis once per test binary, starts
// servers, waits until they listen, and stops them by PID (SIGINT, or
// SIGKILL for a crash). It is for tests only.
package proctest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/child"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Main runs a package's tests (its TestMain calls os.Exit(proctest.Main(m)))
// and then removes the binary Binary built, if it did.
func Main(m *testing.M) int {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	return code
}

// Binary builds cmd/tebis (once) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tebis-bin-")
		if err != nil {
			buildErr = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		binPath = filepath.Join(dir, "tebis")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/tebis")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Proc is a running tebis process.
type Proc struct {
	p *child.Process
}

// PID is the process's ID.
func (p *Proc) PID() int { return p.p.PID() }

// Output returns what the process printed so far.
func (p *Proc) Output(t testing.TB) string {
	t.Helper()
	b, err := p.p.Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Start runs `tebis ARGS...` with its output in a file of the test's
// temporary directory (logged if the test fails). The process is killed
// when the test ends, and if the test binary dies.
func Start(t testing.TB, args ...string) *Proc {
	t.Helper()
	p, err := child.Start(child.Spec{Argv: append([]string{Binary(t)}, args...), Log: filepath.Join(t.TempDir(), "output.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			b, _ := p.Output()
			t.Logf("output of %v:\n%s", args, b)
		}
	})
	return &Proc{p: p}
}

// Stop sends SIGINT and waits (at most 30 s) for a clean exit.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	if err := p.p.Stop(syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("process did not stop within 30s of SIGINT: %v", err)
	}
	if err := p.p.Wait(); err != nil {
		t.Fatalf("process exited with %v", err)
	}
}

// Kill sends SIGKILL (a crash) and waits for the reap.
func (p *Proc) Kill() { _ = p.p.Kill() }

// Signal sends sig (if the process still runs).
func (p *Proc) Signal(sig syscall.Signal) { _ = p.p.Signal(sig) }

// WaitTCP waits (at most 30 s) until addr accepts connections.
func WaitTCP(t testing.TB, p *Proc, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.p.WaitTCP(ctx, addr); err != nil {
		t.Fatal(err)
	}
}

// FreePort returns a loopback address with a port free right now.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
