package torture

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNetns runs f on a thread inside namespace ns ("" for the caller's).
// Sockets made in f stay in ns.
func inNetns(t *testing.T, ns string, f func()) {
	t.Helper()
	if ns == "" {
		f()
		return
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		f()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("entering namespace %s: %v", ns, err)
	}
}

// reach reports whether host from can open a TCP connection to a listener
// of host to within 500 ms.
func reach(t *testing.T, n *netnsNet, from, to string) bool {
	t.Helper()
	var l net.Listener
	inNetns(t, n.hosts[to].ns, func() {
		var err error
		if l, err = net.Listen("tcp", n.hosts[to].addr+":0"); err != nil {
			t.Fatal(err)
		}
	})
	defer l.Close()
	go func() {
		for range 2 {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("x"))
			c.Close()
		}
	}()
	ok := false
	inNetns(t, n.hosts[from].ns, func() {
		c, err := net.DialTimeout("tcp", l.Addr().String(), 500*time.Millisecond)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		b := make([]byte, 1)
		_, err = c.Read(b)
		ok = err == nil
	})
	return ok
}

// TestNetnsCutsAndHeals: hosts in their namespaces reach each other and
// the client; a cut drops exactly the cut link, both ways; uncut and
// healAll restore it; close removes every namespace and the bridge.
func TestNetnsCutsAndHeals(t *testing.T) {
	if !canNetns() {
		t.Skip("needs root, ip and tc (network namespaces)")
	}
	n, err := newNetns(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = n.close()
		}
	})
	for _, h := range []string{"a", "b", "c"} {
		if _, err := n.add(h); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(n.hosts["a"].addr, "198.18.") {
		t.Fatalf("address %s outside 198.18.0.0/15", n.hosts["a"].addr)
	}
	pairs := [][2]string{{"a", "b"}, {"b", "a"}, {"a", "c"}, {"c", "b"}, {clientHost, "a"}, {"a", clientHost}}
	want := func(cut ...link) {
		t.Helper()
		for _, p := range pairs {
			l := link{min(p[0], p[1]), max(p[0], p[1])}
			isCut := false
			for _, c := range cut {
				isCut = isCut || c == l
			}
			if got := reach(t, n, p[0], p[1]); got == isCut {
				t.Fatalf("%s -> %s reachable %t with cuts %v", p[0], p[1], got, cut)
			}
		}
	}
	want()
	if err := n.cut("a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := n.cut(clientHost, "a"); err != nil {
		t.Fatal(err)
	}
	want(link{"a", "b"}, link{"a", clientHost})
	if err := n.uncut("b", "a"); err != nil {
		t.Fatal(err)
	}
	want(link{"a", clientHost})
	if err := n.shape("c", false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(n.describe(), "tbf") && !strings.Contains(n.describe(), "netem") {
		t.Fatalf("describe after shaping: %s", n.describe())
	}
	want(link{"a", clientHost}) // slow, not cut
	if err := n.healAll(); err != nil {
		t.Fatal(err)
	}
	want()
	nsA, bridge := n.hosts["a"].ns, n.bridge
	closed = true
	if err := n.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/var/run/netns/" + nsA); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("namespace %s left after close (%v)", nsA, err)
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Fatalf("bridge %s left after close", bridge)
	}
	if out, _ := exec.Command("ip", "rule").Output(); strings.Contains(string(out), n.prefix) {
		t.Fatalf("rules left after close:\n%s", out)
	}
}

// TestNetnsAgainInOneProcess: a second network of the same process (the
// same names) can be made right after the first is closed, though the
// kernel dismantles a deleted namespace (with its end of each veth pair)
// in the background: here a process still in one keeps it alive.
func TestNetnsAgainInOneProcess(t *testing.T) {
	if !canNetns() {
		t.Skip("needs root, ip and tc (network namespaces)")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	n, err := newNetns(rng)
	if err != nil {
		t.Fatal(err)
	}
	h, err := n.add("a")
	if err != nil {
		n.close()
		t.Fatal(err)
	}
	hold := exec.Command("ip", "netns", "exec", n.hosts["a"].ns, "sleep", "60")
	if err := hold.Start(); err != nil {
		n.close()
		t.Fatal(err)
	}
	defer func() { hold.Process.Kill(); hold.Wait() }()
	for i := 0; ; i++ { // until ip netns exec has entered it and run sleep
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", hold.Process.Pid)); strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		if i == 200 {
			n.close()
			t.Fatal("the holding process never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	n2, err := newNetns(rng)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.close()
	h2, err := n2.add("a")
	if err != nil {
		t.Fatalf("the same host again: %v", err)
	}
	if h2.name != h.name {
		t.Fatalf("host %v, then %v", h, h2)
	}
}

// TestNetnsCutIsSilent: a cut drops packets, as a partition does. A
// connection opened before the cut goes quiet both ways, and a connect
// across the cut times out rather than failing at once (between two
// hosts, and from the client to a host; hosts never dial the client).
func TestNetnsCutIsSilent(t *testing.T) {
	if !canNetns() {
		t.Skip("needs root, ip and tc (network namespaces)")
	}
	n, err := newNetns(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.close() })
	for _, h := range []string{"a", "b"} {
		if _, err := n.add(h); err != nil {
			t.Fatal(err)
		}
	}
	// listen makes a listener on to that echoes every byte back.
	listen := func(to string) net.Listener {
		var l net.Listener
		inNetns(t, n.hosts[to].ns, func() {
			var err error
			if l, err = net.Listen("tcp", n.hosts[to].addr+":0"); err != nil {
				t.Fatal(err)
			}
		})
		t.Cleanup(func() { l.Close() })
		go func() {
			for range 4 {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					b := make([]byte, 1)
					for {
						if _, err := c.Read(b); err != nil {
							return
						}
						if _, err := c.Write(b); err != nil {
							return
						}
					}
				}()
			}
		}()
		return l
	}
	// echo reports whether a byte sent on c comes back within d.
	echo := func(c net.Conn, d time.Duration) bool {
		_ = c.SetDeadline(time.Now().Add(d))
		if _, err := c.Write([]byte("x")); err != nil {
			return false
		}
		_, err := c.Read(make([]byte, 1))
		return err == nil
	}
	dial := func(from string, l net.Listener, d time.Duration) (c net.Conn, err error) {
		inNetns(t, n.hosts[from].ns, func() { c, err = net.DialTimeout("tcp", l.Addr().String(), d) })
		return c, err
	}
	type path struct{ from, to string }
	paths := []path{{"a", "b"}, {"b", "a"}, {clientHost, "a"}}
	listeners := map[string]net.Listener{"a": listen("a"), "b": listen("b")}
	open := map[path]net.Conn{}
	for _, p := range paths {
		c, err := dial(p.from, listeners[p.to], time.Second)
		if err != nil {
			t.Fatalf("%s -> %s before the cut: %v", p.from, p.to, err)
		}
		t.Cleanup(func() { c.Close() })
		if !echo(c, time.Second) {
			t.Fatalf("%s -> %s: no echo before the cut", p.from, p.to)
		}
		open[p] = c
	}
	if err := n.cut("a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := n.cut(clientHost, "a"); err != nil {
		t.Fatal(err)
	}
	const wait = 700 * time.Millisecond
	for _, p := range paths {
		if echo(open[p], wait) {
			t.Errorf("%s -> %s: an open connection still carries data across the cut", p.from, p.to)
		}
		start := time.Now()
		c, err := dial(p.from, listeners[p.to], wait)
		var ne net.Error
		switch {
		case err == nil:
			c.Close()
			t.Errorf("%s -> %s: connected across the cut", p.from, p.to)
		case !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) < wait*9/10:
			t.Errorf("%s -> %s: connect failed after %v with %v, want a timeout after %v (a silent drop)", p.from, p.to, time.Since(start), err, wait)
		}
	}
	if err := n.healAll(); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		c, err := dial(p.from, listeners[p.to], time.Second)
		if err != nil {
			t.Fatalf("%s -> %s after healing: %v", p.from, p.to, err)
		}
		if !echo(c, time.Second) {
			t.Errorf("%s -> %s: no echo after healing", p.from, p.to)
		}
		c.Close()
	}
}
