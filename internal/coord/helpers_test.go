package coord

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/zkserver"
)

// The tests share one standalone ZooKeeper (a JVM start costs seconds);
// each test works under its own root. Tests that disturb the server
// itself start their own.
var shared struct {
	once sync.Once
	dir  string
	srv  *zkserver.Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		_ = shared.srv.Stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// zkAddr returns the shared server's address, starting it first.
func zkAddr(t *testing.T) string {
	t.Helper()
	shared.once.Do(func() {
		if shared.err = zkserver.Installed(); shared.err != nil {
			shared.err = fmt.Errorf("%w; these tests need a real ZooKeeper: run them with `make test` "+
				"(or: sudo apt-get install -y zookeeper)", shared.err)
			return
		}
		if shared.dir, shared.err = os.MkdirTemp("", "coord-zk-"); shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		shared.srv, shared.err = zkserver.Start(ctx, zkserver.Config{Dir: shared.dir})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv.Addr()
}

var roots struct {
	sync.Mutex
	n  int
	of map[*testing.T]string
}

// root is a znode root of the test's own (new for each run of it: the
// server outlives -count runs).
func root(t *testing.T) string {
	roots.Lock()
	defer roots.Unlock()
	if r, ok := roots.of[t]; ok {
		return r
	}
	if roots.of == nil {
		roots.of = map[*testing.T]string{}
	}
	roots.n++
	r := fmt.Sprintf("/%s-%d", strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()), roots.n)
	roots.of[t] = r
	return r
}

// dial opens a session on addrs under the test's root (timeout 0: the
// default) and closes it when the test ends.
func dial(t *testing.T, addrs string, timeout time.Duration) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Dial(ctx, Config{Servers: []string{addrs}, Root: root(t), SessionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test after 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// owner returns the session owning the ephemeral znode p (0: persistent;
// -1: absent).
func owner(t *testing.T, s *Session, p string) int64 {
	t.Helper()
	ok, st, err := s.Conn().Exists(p)
	if err != nil {
		t.Fatalf("exists %s: %v", p, err)
	}
	if !ok {
		return -1
	}
	return st.EphemeralOwner
}

func server(name string) ServerInfo {
	return ServerInfo{Server: regionmap.Server{Name: name, TCP: "127.0.0.1:1"}, Started: 1}
}

// testMap is a valid map of two servers at the given version.
func testMap(version uint64) *regionmap.Map {
	return &regionmap.Map{
		Version: version,
		Servers: []regionmap.Server{server("rs1").Server, server("rs2").Server},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "rs1", Backups: []string{"rs2"}, Epoch: 1}},
	}
}

// proxy forwards TCP connections to a ZooKeeper server; Cut partitions
// its clients (open connections are closed, new ones refused) until Heal.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go p.serve()
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close(); c.Close() }()
		go func() { _, _ = io.Copy(c, s); s.Close(); c.Close() }()
	}
}

func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func zkserverEnsemble(t *testing.T) *zkserver.Ensemble { return zkserver.EnsembleForTest(t, 3) }
