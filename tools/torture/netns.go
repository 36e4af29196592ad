package torture

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// netnsNet runs each host in a network namespace of its own, joined to the
// others by a veth pair on a bridge in the caller's namespace (where the
// checking clients run). Addresses come from one /24 of 198.18.0.0/15 (the
// benchmarking range) not in use on the machine: the bridge holds .1, the
// hosts .10 up. The namespaces have no default route, so nothing leaves
// the /24.
//
// Faults: a cut drops packets, as a partition does. Each host's namespace
// on the cut link drops on input what comes from the peer's address (an
// "ip rule ... from PEER blackhole" ahead of the local table, which add
// moves behind the cuts' priority): an established connection goes quiet
// both ways, and a connect across the cut times out (or, once the peers'
// neighbour entries expired, after tens of seconds, fails after ~3 s of
// unanswered ARP, as toward a host gone from the link). The client's
// namespace (the caller's) gets no rules; a host cut from the client also
// blackholes its own output toward it (its connects to the client would
// fail at once: none are made). Shaping is netem
// where the kernel has sch_netem, else tbf (a slow link whose queue
// overflows).
//
// Names carry the creating process's PID (tt<pid>...): close removes this
// run's, and newNetns first removes those of runs whose process is gone,
// and cut rules of the root namespace (made by older versions of this
// tool) toward a 198.18 subnet no bridge holds.
type netnsNet struct {
	id     string // the PID, in every name
	prefix string // 198.18.N.
	bridge string

	mu     sync.Mutex
	hosts  map[string]*nsHost
	cuts   map[link]bool
	shaped map[string]bool
	netem  bool // sch_netem found
}

type nsHost struct {
	host
	ns   string // namespace name; "" for the client
	veth string // root-side veth
	idx  int
}

// ipCmd runs ip (or tc) with args; the error quotes its output.
func ipCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("torture: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// canNetns reports whether namespaces can be made here (root, ip and tc
// present).
func canNetns() bool {
	if os.Geteuid() != 0 {
		return false
	}
	for _, c := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(c); err != nil {
			return false
		}
	}
	return true
}

// newNetns creates the bridge; hosts are added with add.
func newNetns(rng *rand.Rand) (*netnsNet, error) {
	sweepStale()
	n := &netnsNet{id: strconv.Itoa(os.Getpid()), hosts: map[string]*nsHost{}, cuts: map[link]bool{}, shaped: map[string]bool{}}
	n.bridge = "ttb" + n.id
	used := usedSubnets()
	for range 64 {
		if c := 1 + rng.IntN(254); !used[c] {
			n.prefix = fmt.Sprintf("198.18.%d.", c)
			break
		}
	}
	if n.prefix == "" {
		return nil, fmt.Errorf("torture: no free /24 in 198.18.0.0/24-198.18.255.0/24")
	}
	steps := [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", n.prefix + "1/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	for _, s := range steps {
		if err := ipCmd("ip", s...); err != nil {
			_ = n.close()
			return nil, err
		}
	}
	n.hosts[clientHost] = &nsHost{host: host{name: clientHost, addr: n.prefix + "1"}}
	// Which shaping this kernel has: netem on the bridge, removed at once.
	n.netem = ipCmd("tc", append([]string{"qdisc", "add", "dev", n.bridge, "root"}, shapeArgs(true, false)...)...) == nil
	if n.netem {
		_ = ipCmd("tc", "qdisc", "del", "dev", n.bridge, "root")
	}
	return n, nil
}

// usedSubnets returns the third octets of 198.18.x.y addresses on the
// machine.
func usedSubnets() map[int]bool {
	used := map[int]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip := ipn.IP.To4(); ip != nil && ip[0] == 198 && ip[1] == 18 {
				used[int(ip[2])] = true
			}
		}
	}
	return used
}

// sweepStale removes the namespaces and bridges of earlier runs whose
// process is gone (a run killed before its close).
func sweepStale() {
	alive := func(name, prefix string) bool {
		rest := strings.TrimPrefix(name, prefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil {
			return true // not ours
		}
		return syscall.Kill(pid, 0) == nil
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && strings.HasPrefix(f[0], "tt") && !alive(f[0], "tt") {
				_ = ipCmd("ip", "netns", "del", f[0])
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		for _, p := range []string{"ttb", "ttv"} {
			if strings.HasPrefix(i.Name, p) && !alive(strings.SplitN(i.Name, ".", 2)[0], p) {
				_ = ipCmd("ip", "link", "del", i.Name)
			}
		}
	}
	// Cuts of the client in the root namespace (older versions of this
	// tool made them) toward a subnet no live run's bridge holds.
	used := usedSubnets()
	out, err := exec.Command("ip", "rule", "show", "priority", strconv.Itoa(cutPriority)).Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		i := slices.Index(f, "to")
		if i < 0 || i+1 >= len(f) || !slices.Contains(f, "blackhole") {
			continue
		}
		ip := net.ParseIP(strings.TrimSuffix(f[i+1], "/32")).To4()
		if ip != nil && ip[0] == 198 && ip[1] == 18 && !used[int(ip[2])] {
			_ = ipCmd("ip", "rule", "del", "priority", strconv.Itoa(cutPriority), "to", f[i+1], "blackhole")
		}
	}
}

// cutPriority is the priority of the cuts' rules; localPriority, the
// local table's in a host's namespace (after them).
const (
	cutPriority   = 100
	localPriority = 200
)

func (n *netnsNet) describe() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	shaping := "tbf, a slow link and a short queue (no sch_netem in this kernel)"
	if n.netem {
		shaping = "netem delay and loss"
	}
	return fmt.Sprintf("netns (one namespace per process on %s0/24; cuts: silent drops (ip rule blackhole of input from the peer); shaping: %s)", n.prefix, shaping)
}

func (n *netnsNet) partitions() bool { return true }

func (n *netnsNet) client() host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hosts[clientHost].host
}

func (n *netnsNet) add(name string) (host, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if h, ok := n.hosts[name]; ok {
		return h.host, nil
	}
	idx := len(n.hosts) // the client is 0
	if idx > 200 {
		return host{}, fmt.Errorf("torture: too many hosts")
	}
	h := &nsHost{idx: idx, ns: fmt.Sprintf("tt%s-%s", n.id, name), veth: fmt.Sprintf("ttv%s.%d", n.id, idx)}
	h.name, h.addr = name, fmt.Sprintf("%s%d", n.prefix, 9+idx)
	h.wrap = []string{"ip", "netns", "exec", h.ns}
	peer := h.veth + "p"
	// A pair of an earlier network of this process (same names) may still
	// be going away: the kernel dismantles a deleted namespace's devices
	// in the background.
	_ = exec.Command("ip", "link", "del", h.veth).Run()
	steps := [][]string{
		{"netns", "add", h.ns},
		{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.ns},
		{"link", "set", h.veth, "master", n.bridge},
		{"link", "set", h.veth, "up"},
		{"-n", h.ns, "link", "set", peer, "name", "eth0"},
		{"-n", h.ns, "addr", "add", h.addr + "/24", "dev", "eth0"},
		{"-n", h.ns, "link", "set", "eth0", "up"},
		{"-n", h.ns, "link", "set", "lo", "up"},
		// The local table after the cuts' rules: their input drops then
		// apply to packets addressed to the host.
		{"-n", h.ns, "rule", "add", "priority", strconv.Itoa(localPriority), "lookup", "local"},
		{"-n", h.ns, "rule", "del", "priority", "0", "lookup", "local"},
	}
	for _, s := range steps {
		if err := ipCmd("ip", s...); err != nil {
			_ = ipCmd("ip", "netns", "del", h.ns)
			return host{}, err
		}
	}
	n.hosts[name] = h
	return h.host, nil
}

// rule adds (or deletes) in h's namespace the blackhole of what comes from
// addr (dir "from") or goes to it ("to").
func (n *netnsNet) rule(h *nsHost, op, dir, addr string) error {
	return ipCmd("ip", "-n", h.ns, "rule", op, "priority", strconv.Itoa(cutPriority), dir, addr+"/32", "blackhole")
}

// cutRule is one blackhole rule of a cut, in h's namespace.
type cutRule struct {
	h         *nsHost
	dir, addr string // dir: "from" (input) or "to" (output)
}

// cutRules are the rules of a cut between a and b: every namespace on the
// link drops what comes from the other; one cut from the client (in the
// caller's namespace, left alone) also drops what it sends to it.
func cutRules(a, b *nsHost) []cutRule {
	var out []cutRule
	for _, p := range [][2]*nsHost{{a, b}, {b, a}} {
		h, peer := p[0], p[1]
		if h.ns == "" {
			continue
		}
		out = append(out, cutRule{h, "from", peer.addr})
		if peer.ns == "" {
			out = append(out, cutRule{h, "to", peer.addr})
		}
	}
	return out
}

func (n *netnsNet) pair(a, b string) (*nsHost, *nsHost, link, error) {
	ha, hb := n.hosts[a], n.hosts[b]
	if ha == nil || hb == nil || a == b {
		return nil, nil, link{}, fmt.Errorf("torture: no link %s-%s", a, b)
	}
	if a > b {
		a, b = b, a
	}
	return ha, hb, link{a, b}, nil
}

func (n *netnsNet) cut(a, b string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	ha, hb, l, err := n.pair(a, b)
	if err != nil || n.cuts[l] {
		return err
	}
	rules := cutRules(ha, hb)
	for i, r := range rules {
		if err := n.rule(r.h, "add", r.dir, r.addr); err != nil {
			for _, r := range rules[:i] {
				_ = n.rule(r.h, "del", r.dir, r.addr)
			}
			return err
		}
	}
	n.cuts[l] = true
	return nil
}

func (n *netnsNet) uncut(a, b string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.uncutLocked(a, b)
}

func (n *netnsNet) uncutLocked(a, b string) error {
	ha, hb, l, err := n.pair(a, b)
	if err != nil || !n.cuts[l] {
		return err
	}
	for _, r := range cutRules(ha, hb) {
		if e := n.rule(r.h, "del", r.dir, r.addr); err == nil {
			err = e
		}
	}
	delete(n.cuts, l)
	return err
}

// shapeArgs are the qdisc parameters of a slow or lossy link.
func shapeArgs(netem, lossy bool) []string {
	switch {
	case netem && lossy:
		return []string{"netem", "delay", "20ms", "10ms", "loss", "10%"}
	case netem:
		return []string{"netem", "delay", "150ms", "50ms"}
	case lossy: // a queue of a few packets: most of a burst is dropped
		return []string{"tbf", "rate", "2mbit", "burst", "8kb", "limit", "6kb"}
	default: // a slow link with a deep queue: delays of up to 400 ms
		return []string{"tbf", "rate", "4mbit", "burst", "32kb", "latency", "400ms"}
	}
}

func (n *netnsNet) shape(name string, lossy bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := n.hosts[name]
	if h == nil || h.ns == "" {
		return fmt.Errorf("torture: cannot shape host %q", name)
	}
	if n.shaped[name] {
		return nil
	}
	q := shapeArgs(n.netem, lossy)
	if err := ipCmd("tc", append([]string{"qdisc", "add", "dev", h.veth, "root"}, q...)...); err != nil {
		return err
	}
	if err := ipCmd("tc", append([]string{"-n", h.ns, "qdisc", "add", "dev", "eth0", "root"}, q...)...); err != nil {
		_ = ipCmd("tc", "qdisc", "del", "dev", h.veth, "root")
		return err
	}
	n.shaped[name] = true
	return nil
}

func (n *netnsNet) unshape(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unshapeLocked(name)
}

func (n *netnsNet) unshapeLocked(name string) error {
	h := n.hosts[name]
	if h == nil || !n.shaped[name] {
		return nil
	}
	err := ipCmd("tc", "qdisc", "del", "dev", h.veth, "root")
	if e := ipCmd("tc", "-n", h.ns, "qdisc", "del", "dev", "eth0", "root"); err == nil {
		err = e
	}
	delete(n.shaped, name)
	return err
}

func (n *netnsNet) healAll() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var first error
	for l := range n.cuts {
		if err := n.uncutLocked(l.a, l.b); err != nil && first == nil {
			first = err
		}
	}
	for name := range n.shaped {
		if err := n.unshapeLocked(name); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// close removes the rules, namespaces (with their veth pairs) and bridge.
func (n *netnsNet) close() error {
	err := n.healAll()
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, h := range n.hosts {
		if h.ns != "" {
			// The pair first, at once (the namespace's own devices go in
			// the background), then the namespace.
			if e := ipCmd("ip", "link", "del", h.veth); e != nil && err == nil {
				err = e
			}
			if e := ipCmd("ip", "netns", "del", h.ns); e != nil && err == nil {
				err = e
			}
		}
		delete(n.hosts, name)
	}
	if e := ipCmd("ip", "link", "del", n.bridge); e != nil && err == nil {
		err = e
	}
	return err
}
