package zkserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ErrRunning reports that Restart was asked to start a member whose JVM
// has not exited (Done is not closed): Kill or Stop it first.
var ErrRunning = errors.New("zookeeper process is still running")

// Fixed ports of a member with its own Host (see Member).
const (
	fixedClientPort   = 2181
	fixedQuorumPort   = 2888
	fixedElectionPort = 3888
)

// Member places one ensemble member (see StartEnsembleOn).
type Member struct {
	// Host is the IPv4 address the member listens on: its client,
	// quorum and election ports, and the address in every member's
	// server.N line. Empty or 127.0.0.1 means 127.0.0.1 with free ports
	// picked at start; any other address gets the fixed ports 2181 (client),
	// 2888 (quorum) and 3888 (election), so no two members may share it.
	Host string
	// Wrap, if set, is the command prefix the JVM runs under, e.g.
	// {"ip", "netns", "exec", "ns1"}. It must exec the JVM (not fork it):
	// then the PID, the process group and the parent-death signal are
	// the JVM's, and Stop, Kill, Pause and Resume work as without it.
	Wrap []string
}

// Ensemble is a ZooKeeper ensemble of separate JVMs, on 127.0.0.1
// (StartEnsemble) or on the members' hosts (StartEnsembleOn).
type Ensemble struct {
	// Servers are the members; Servers[i] has myid i+1 and directory
	// dir/zk<i+1>. Its length never changes. Restart replaces
	// Servers[i] with a new Server (the old one stays exited), under the
	// ensemble's lock: code that may run concurrently with Restart must
	// read members through Server or Snapshot, not this field.
	Servers []*Server

	mu       sync.Mutex // guards the elements of Servers
	launches []launch   // how to start Servers[i], again for Restart
}

// StartEnsemble runs n (at least 2; 3 for a quorum that survives a
// failure) servers on 127.0.0.1 in subdirectories of dir and waits until
// every one is a leader or a follower. Without a deadline on ctx it waits
// at most 30 s. On error no JVM is left running. The caller must Stop the
// returned ensemble.
func StartEnsemble(ctx context.Context, dir string, n int) (*Ensemble, error) {
	if n < 2 {
		return nil, fmt.Errorf("zkserver: ensemble of %d servers (use Start for one)", n)
	}
	return StartEnsembleOn(ctx, dir, make([]Member, n))
}

// StartEnsembleOn runs one server per member, members[i] with myid i+1 in
// dir/zk<i+1>, and waits until every one is a leader or a follower (a
// single member runs standalone and is waited for as such). Without a
// deadline on ctx it waits at most 30 s. On error no JVM is left running
// (if a port picked for a 127.0.0.1 member is taken meanwhile, it tries
// again with others). The caller must Stop the returned ensemble. The
// members slice is not retained.
func StartEnsembleOn(ctx context.Context, dir string, members []Member) (*Ensemble, error) {
	if err := checkMembers(members); err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		e, err := startEnsemble(ctx, dir, members)
		if err == nil {
			return e, nil
		}
		if attempt < maxStartAttempts && errors.Is(err, errBindFailed) && slices.ContainsFunc(members, Member.onLoopback) {
			continue
		}
		return nil, err
	}
}

func (m Member) onLoopback() bool { return m.Host == "" || m.Host == loopback }

// checkMembers rejects an empty list, a Host that is not an IPv4 address
// and two members with the same Host other than 127.0.0.1.
func checkMembers(members []Member) error {
	if len(members) == 0 {
		return fmt.Errorf("zkserver: ensemble of no members")
	}
	seen := map[string]bool{}
	for i, m := range members {
		if m.onLoopback() {
			continue
		}
		if ip := net.ParseIP(m.Host); ip == nil || ip.To4() == nil {
			return fmt.Errorf("zkserver: member %d: host %q is not an IPv4 address", i, m.Host)
		}
		if seen[m.Host] {
			return fmt.Errorf("zkserver: member %d: host %s shared with another member (its ports are fixed)", i, m.Host)
		}
		seen[m.Host] = true
	}
	return nil
}

// plan places the members: their directories (absolute, so Restart does
// not depend on the working directory), hosts, ports and server.N lines.
func plan(dir string, members []Member) ([]launch, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	// Client, quorum and election ports for each member on 127.0.0.1.
	ports, err := freePorts(3 * countFunc(members, Member.onLoopback))
	if err != nil {
		return nil, err
	}
	launches := make([]launch, len(members))
	var servers []string
	for i, m := range members {
		host, client, quorum, election := m.Host, fixedClientPort, fixedQuorumPort, fixedElectionPort
		if m.onLoopback() {
			host, client, quorum, election = loopback, ports[0], ports[1], ports[2]
			ports = ports[3:]
		}
		servers = append(servers, fmt.Sprintf("server.%d=%s:%d:%d", i+1, host, quorum, election))
		launches[i] = launch{
			dir: filepath.Join(dir, fmt.Sprintf("zk%d", i+1)), host: host, port: client,
			wrap: slices.Clone(m.Wrap), maxSession: defaultMaxSessionTimeout, log: zap.NewNop(),
		}
	}
	if len(members) > 1 {
		for i := range launches {
			launches[i].peer = &peer{id: i + 1, servers: servers}
		}
	}
	return launches, nil
}

func countFunc[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}

func startEnsemble(ctx context.Context, dir string, members []Member) (*Ensemble, error) {
	launches, err := plan(dir, members)
	if err != nil {
		return nil, err
	}
	e := &Ensemble{launches: launches}
	for _, l := range launches {
		s, err := spawn(l)
		if err != nil {
			_ = e.Stop()
			return nil, err
		}
		e.Servers = append(e.Servers, s)
	}
	for _, s := range e.Servers {
		if err := s.waitReady(ctx, e.ready); err != nil {
			_ = e.Kill()
			return nil, err
		}
	}
	return e, nil
}

// ready tells whether a member in mode serves as part of the ensemble.
func (e *Ensemble) ready(mode string) bool {
	if len(e.launches) == 1 {
		return mode == "standalone"
	}
	return mode == "leader" || mode == "follower"
}

// Server returns member i (myid i+1), the one Restart last started; it
// is safe for use concurrently with Restart.
func (e *Ensemble) Server(i int) *Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.Servers[i]
}

// Snapshot returns a copy of Servers taken under the ensemble's lock; it
// is safe for use concurrently with Restart.
func (e *Ensemble) Snapshot() []*Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.Servers)
}

// Restart starts member i (myid i+1) again with its directory, hence its
// data, and its host, ports and command prefix, then waits until it is a
// leader or a follower (standalone for a one-member ensemble). The
// member's JVM must have exited (Kill, Stop or a crash, and Done closed),
// else the error wraps ErrRunning. Once the new JVM is started it
// replaces Servers[i]; if it is not ready in time (without a deadline on
// ctx, 30 s) it is killed, stays there exited, and the error quotes its
// log, so Restart may be called again. Safe for concurrent use with the
// other methods, but a Restart racing with Stop or Kill may leave the
// member running: the caller must Stop the ensemble after the last
// Restart returned.
func (e *Ensemble) Restart(ctx context.Context, i int) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	s, err := e.respawn(i)
	if err != nil {
		return err
	}
	if err := s.waitReady(ctx, e.ready); err != nil {
		_ = s.Kill()
		return fmt.Errorf("zkserver: restart member %d: %w", i, err)
	}
	return nil
}

// respawn starts member i's JVM again and puts it in Servers[i].
func (e *Ensemble) respawn(i int) (*Server, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i < 0 || i >= len(e.Servers) {
		return nil, fmt.Errorf("zkserver: restart member %d of %d", i, len(e.Servers))
	}
	old := e.Servers[i]
	select {
	case <-old.Done():
	default:
		return nil, fmt.Errorf("zkserver: restart member %d (%s, pid %d): %w", i, old.Addr(), old.PID(), ErrRunning)
	}
	s, err := spawn(e.launches[i])
	if err != nil {
		return nil, fmt.Errorf("zkserver: restart member %d: %w", i, err)
	}
	e.Servers[i] = s
	return s, nil
}

// ConnectString lists the members' client addresses, comma-separated.
func (e *Ensemble) ConnectString() string {
	return strings.Join(e.Addrs(), ",")
}

// Addrs lists the members' client addresses.
func (e *Ensemble) Addrs() []string {
	servers := e.Snapshot()
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Leader waits until a running member reports Mode leader (standalone,
// for a one-member ensemble) and returns it; without a deadline on ctx it
// waits at most 30 s.
func (e *Ensemble) Leader(ctx context.Context) (*Server, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	want := "leader"
	if len(e.launches) == 1 {
		want = "standalone"
	}
	for {
		for _, s := range e.Snapshot() {
			select {
			case <-s.Done():
				continue
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			mode, err := s.Mode(pctx)
			cancel()
			if err == nil && mode == want {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("zkserver: no leader: %w", ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// Stop stops every member (see Server.Stop); it is idempotent.
func (e *Ensemble) Stop() error {
	return e.each((*Server).Stop)
}

// Kill kills every member (see Server.Kill); it is idempotent.
func (e *Ensemble) Kill() error {
	return e.each((*Server).Kill)
}

// each runs f on every member concurrently and joins the errors.
func (e *Ensemble) each(f func(*Server) error) error {
	servers := e.Snapshot()
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errs <- f(s) }()
	}
	var all []error
	for range servers {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
