package zkserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Ensemble is a ZooKeeper ensemble of separate JVMs on 127.0.0.1.
type Ensemble struct {
	// Servers are the members; Servers[i] has myid i+1 and directory
	// dir/zk<i+1>.
	Servers []*Server
}

// StartEnsemble runs n (at least 2; 3 for a quorum that survives a
// failure) servers in subdirectories of dir and waits until every one is
// a leader or a follower. Without a deadline on ctx it waits at most
// 30 s. On error no JVM is left running. The caller must Stop the
// returned ensemble.
func StartEnsemble(ctx context.Context, dir string, n int) (*Ensemble, error) {
	if n < 2 {
		return nil, fmt.Errorf("zkserver: ensemble of %d servers (use Start for one)", n)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		e, err := startEnsemble(ctx, dir, n)
		if err == nil {
			return e, nil
		}
		if attempt < maxStartAttempts && errors.Is(err, errBindFailed) {
			continue
		}
		return nil, err
	}
}

func startEnsemble(ctx context.Context, dir string, n int) (*Ensemble, error) {
	ports, err := freePorts(3 * n) // client, peer, election for each
	if err != nil {
		return nil, err
	}
	p := peer{}
	for i := range n {
		p.servers = append(p.servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3*i+1], ports[3*i+2]))
	}
	e := &Ensemble{}
	for i := range n {
		p := p
		p.id = i + 1
		s, err := spawn(filepath.Join(dir, fmt.Sprintf("zk%d", i+1)), ports[3*i], defaultMaxSessionTimeout, &p, zap.NewNop())
		if err != nil {
			_ = e.Stop()
			return nil, err
		}
		e.Servers = append(e.Servers, s)
	}
	for _, s := range e.Servers {
		err := s.waitReady(ctx, func(mode string) bool { return mode == "leader" || mode == "follower" })
		if err != nil {
			_ = e.Kill()
			return nil, err
		}
	}
	return e, nil
}

// ConnectString lists the members' client addresses, comma-separated.
func (e *Ensemble) ConnectString() string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr()
	}
	return strings.Join(addrs, ",")
}

// Addrs lists the members' client addresses.
func (e *Ensemble) Addrs() []string {
	return strings.Split(e.ConnectString(), ",")
}

// Leader waits until a running member reports Mode leader and returns it;
// without a deadline on ctx it waits at most 30 s.
func (e *Ensemble) Leader(ctx context.Context) (*Server, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for {
		for _, s := range e.Servers {
			select {
			case <-s.Done():
				continue
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			mode, err := s.Mode(pctx)
			cancel()
			if err == nil && mode == "leader" {
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
	errs := make(chan error, len(e.Servers))
	for _, s := range e.Servers {
		go func() { errs <- f(s) }()
	}
	var all []error
	for range e.Servers {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
