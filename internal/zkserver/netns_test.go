package zkserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// testNet is the range the namespaced tests take a /24 of: 198.18.0.0/15,
// reserved for benchmarking (RFC 2544), so never a real network.
var testNet = netip.MustParsePrefix("198.18.0.0/15")

// netnsForTest creates n network namespaces <prefix>-zk<i+1>, each joined
// by a veth pair to a bridge <prefix>-br in the root namespace, with lo
// up, on a /24 of testNet unused here: the bridge has .1, namespace i has
// .11+i. It returns the namespaces and their addresses; t.Cleanup removes
// every namespace, veth and the bridge, also when the test fails. prefix
// is unique per call.
func netnsForTest(t *testing.T, ip string, n int) (names, hosts []string) {
	t.Helper()
	subnet := freeSubnet(t)
	prefix := "tzk" + randomHex(t, 3)
	var undo [][]string
	t.Cleanup(func() {
		for i := len(undo) - 1; i >= 0; i-- {
			if err := run(undo[i]...); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	do := func(cmd []string, rollback ...string) {
		t.Helper()
		if err := run(cmd...); err != nil {
			t.Fatal(err)
		}
		if rollback != nil {
			undo = append(undo, rollback)
		}
	}
	bridge := prefix + "-br"
	do([]string{ip, "link", "add", bridge, "type", "bridge"}, ip, "link", "del", bridge)
	do([]string{ip, "addr", "add", hostIn(subnet, 1) + "/24", "dev", bridge})
	do([]string{ip, "link", "set", bridge, "up"})
	for i := range n {
		ns := fmt.Sprintf("%s-zk%d", prefix, i+1)
		outer, inner := fmt.Sprintf("%s-h%d", prefix, i+1), fmt.Sprintf("%s-n%d", prefix, i+1)
		host := hostIn(subnet, 11+i)
		do([]string{ip, "netns", "add", ns}, ip, "netns", "del", ns)
		do([]string{ip, "-n", ns, "link", "set", "lo", "up"})
		// Deleting the outer end deletes the pair, wherever the inner is.
		do([]string{ip, "link", "add", outer, "type", "veth", "peer", "name", inner}, ip, "link", "del", outer)
		do([]string{ip, "link", "set", inner, "netns", ns})
		do([]string{ip, "link", "set", outer, "master", bridge})
		do([]string{ip, "link", "set", outer, "up"})
		do([]string{ip, "-n", ns, "addr", "add", host + "/24", "dev", inner})
		do([]string{ip, "-n", ns, "link", "set", inner, "up"})
		names, hosts = append(names, ns), append(hosts, host)
	}
	return names, hosts
}

// freeSubnet picks a random /24 of testNet that no local address is in.
func freeSubnet(t *testing.T) netip.Prefix {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for range 64 {
		b := make([]byte, 2)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		base := testNet.Addr().As4()
		base[2], base[3] = b[1], 0
		base[1] += b[0] & 1
		subnet := netip.PrefixFrom(netip.AddrFrom4(base), 24)
		if !overlaps(subnet, addrs) {
			return subnet
		}
	}
	t.Fatalf("no unused /24 in %v", testNet)
	return netip.Prefix{}
}

func overlaps(subnet netip.Prefix, addrs []net.Addr) bool {
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(ipn.String())
		if err == nil && p.Overlaps(subnet) {
			return true
		}
	}
	return false
}

// hostIn is address .i of a /24.
func hostIn(subnet netip.Prefix, i int) string {
	a := subnet.Addr().As4()
	a[3] = byte(i)
	return netip.AddrFrom4(a).String()
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// run runs a command, at most 10 s, and quotes its output in its error.
func run(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// TestEnsembleInNetns runs a member in each of three network namespaces,
// and a one-member ensemble in a fourth, and uses them from the root
// namespace, through a bridge.
func TestEnsembleInNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("needs ip (iproute2)")
	}
	t.Parallel()
	requireInstalled(t)
	names, hosts := netnsForTest(t, ip, 4) // three for the ensemble, one for a standalone server
	members := make([]Member, len(names))
	for i := range members {
		members[i] = Member{Host: hosts[i], Wrap: []string{ip, "netns", "exec", names[i]}}
	}
	one := ensembleOnForTest(t, members[3:])
	e := ensembleOnForTest(t, members[:3])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for i, s := range e.Servers {
		inNamespace(t, s, names[i])
		if want := net.JoinHostPort(hosts[i], "2181"); s.Addr() != want {
			t.Fatalf("member %d at %s, want %s", i, s.Addr(), want)
		}
	}
	wantModes(t, ctx, e, map[string]int{"leader": 1, "follower": 2})
	create(t, connect(t, e.Servers[0].Addr()), "/before")
	wantZnodes(t, connect(t, e.Servers[2].Addr()), "/before")

	s := restart(t, ctx, e, 1, "/before")
	inNamespace(t, s, names[1])
	wantModes(t, ctx, e, map[string]int{"leader": 1, "follower": 2})

	inNamespace(t, one.Server(0), names[3])
	wantModes(t, ctx, one, map[string]int{"standalone": 1})
	create(t, connect(t, net.JoinHostPort(hosts[3], "2181")), "/one")
	restart(t, ctx, one, 0, "/one")
}

// inNamespace checks that the server's PID is the JVM's (ip netns exec
// execs it) and that it runs in the network namespace ns.
func inNamespace(t *testing.T, s *Server, ns string) {
	t.Helper()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", s.PID()))
	if err != nil || strings.TrimSpace(string(comm)) != "java" {
		t.Fatalf("pid %d runs %q (%v), want java", s.PID(), comm, err)
	}
	own, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", s.PID()))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Stat("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(own, want) {
		t.Fatalf("pid %d is not in network namespace %s", s.PID(), ns)
	}
}
