package torture

import (
	"errors"
	"fmt"
)

// errNoPartitions is returned by a network that cannot cut links (the
// loopback network, when not root).
var errNoPartitions = errors.New("torture: this network cannot cut links (not root: loopback only)")

// host is one place a process runs: its address, and the command prefix
// that starts a process there.
type host struct {
	name string
	addr string   // IP address the processes there listen on
	wrap []string // command prefix (ip netns exec ...), nil in the caller's namespace
}

// link is a pair of hosts; a cut of a link drops traffic both ways.
type link struct{ a, b string }

// network places the cluster's processes and injects the network faults.
// Its methods are safe for concurrent use. The real implementation is
// netnsNet (one network namespace per host, joined by a bridge); loopback
// is its twin for machines where namespaces cannot be made.
type network interface {
	// describe says how faults reach the network.
	describe() string
	// add creates host name (idempotent) and returns it.
	add(name string) (host, error)
	// client is the host of the checking clients (the caller's namespace).
	client() host
	// cut drops every packet between a and b, both ways, until healed.
	cut(a, b string) error
	// uncut removes the cut between a and b.
	uncut(a, b string) error
	// shape slows (and with lossy, drops part of) the traffic leaving and
	// entering host name.
	shape(name string, lossy bool) error
	// unshape removes host name's shaping.
	unshape(name string) error
	// partitions reports whether cut and shape work here.
	partitions() bool
	// healAll removes every cut and shaping.
	healAll() error
	// close heals and removes everything the network created.
	close() error
}

// loopback is the network when namespaces cannot be made: every host is
// 127.0.0.1 and nothing can be cut or shaped.
type loopback struct{}

func (loopback) describe() string {
	return "loopback (every process on 127.0.0.1, shm between them: partitions and shaping skipped)"
}
func (loopback) add(name string) (host, error) {
	return host{name: name, addr: "127.0.0.1"}, nil
}
func (loopback) client() host             { return host{name: clientHost, addr: "127.0.0.1"} }
func (loopback) cut(a, b string) error    { return errNoPartitions }
func (loopback) uncut(a, b string) error  { return nil }
func (loopback) shape(string, bool) error { return errNoPartitions }
func (loopback) unshape(string) error     { return nil }
func (loopback) partitions() bool         { return false }
func (loopback) healAll() error           { return nil }
func (loopback) close() error             { return nil }

func (l link) String() string { return fmt.Sprintf("%s<->%s", l.a, l.b) }

// clientHost names the checking clients' host.
const clientHost = "client"
