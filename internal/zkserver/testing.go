package zkserver

import (
	"context"
	"testing"
	"time"
)

// ForTest starts a standalone server in t.TempDir() and stops it when the
// test ends (logging the end of zk.log if the test failed). If java or
// ZooKeeper is missing the test fails: tebis's tests need a real
// ZooKeeper, which `make test` installs.
func ForTest(t testing.TB) *Server {
	t.Helper()
	requireInstalled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("zookeeper %s, last lines of %s:\n%s", s.Addr(), s.LogPath(), s.logTail())
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// EnsembleForTest is ForTest for an ensemble of n servers.
func EnsembleForTest(t testing.TB, n int) *Ensemble {
	t.Helper()
	requireInstalled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := StartEnsemble(ctx, t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

func requireInstalled(t testing.TB) {
	t.Helper()
	if err := Installed(); err != nil {
		t.Fatalf("zkserver: %v; these tests need a real ZooKeeper: run them with `make test`, "+
			"which installs the Debian zookeeper package (or: sudo apt-get install -y zookeeper)", err)
	}
}
