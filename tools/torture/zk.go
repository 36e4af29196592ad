package torture

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tebis-go/tebis/internal/zkserver"
)

// zkEnsemble is the cluster's ZooKeeper: n servers, each on a host of its
// own (zk1...).
type zkEnsemble struct {
	e     *zkserver.Ensemble
	names []string
	dir   string
}

// startZK starts n ZooKeeper servers on new hosts of net.
func startZK(ctx context.Context, dir string, net network, n int) (*zkEnsemble, error) {
	z := &zkEnsemble{dir: dir}
	var members []zkserver.Member
	for i := range n {
		name := fmt.Sprintf("zk%d", i+1)
		h, err := net.add(name)
		if err != nil {
			return nil, err
		}
		z.names = append(z.names, name)
		members = append(members, zkserver.Member{Host: h.addr, Wrap: h.wrap})
	}
	e, err := zkserver.StartEnsembleOn(ctx, dir, members)
	if err != nil {
		return nil, fmt.Errorf("torture: zookeeper: %w", err)
	}
	z.e = e
	return z, nil
}

// connect is the ensemble's connect string.
func (z *zkEnsemble) connect() string { return z.e.ConnectString() }

// hosts names the servers' hosts.
func (z *zkEnsemble) hosts() []string { return z.names }

// logs lists the servers' log files.
func (z *zkEnsemble) logs() []string {
	var out []string
	for i := range z.names {
		out = append(out, filepath.Join(z.e.Server(i).Dir(), "zk.log"))
	}
	return out
}

// kill SIGKILLs server i.
func (z *zkEnsemble) kill(i int) error { return z.e.Server(i).Kill() }

// restart starts server i again, with its data.
func (z *zkEnsemble) restart(ctx context.Context, i int) error { return z.e.Restart(ctx, i) }

// restartExited starts again every server that has exited.
func (z *zkEnsemble) restartExited(ctx context.Context) error {
	for i := range z.names {
		select {
		case <-z.e.Server(i).Done():
			if err := z.e.Restart(ctx, i); err != nil {
				return err
			}
		default:
		}
	}
	return nil
}

// serving reports whether every server is a leader or follower
// (standalone for one), and why not.
func (z *zkEnsemble) serving(ctx context.Context) (bool, string) {
	for i, name := range z.names {
		mc, cancel := context.WithTimeout(ctx, time.Second)
		mode, err := z.e.Server(i).Mode(mc)
		cancel()
		if err != nil || (mode != "leader" && mode != "follower" && mode != "standalone") {
			return false, fmt.Sprintf("%s: mode %q (%v)", name, mode, err)
		}
	}
	return true, ""
}

// stop stops every server.
func (z *zkEnsemble) stop() error { return z.e.Stop() }
