package client

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// ZooKeeper is the region map of a managed cluster, as its master
// publishes it in ZooKeeper. Load reads the current map; a Client opened
// on it also follows every new version through a watch, so it routes by
// the newest map without waiting for a WRONG_REGION. Close it after the
// clients using it.
type ZooKeeper struct {
	sess   *coord.Session
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	subs []func(*regionmap.Map)
}

// ZooKeeperOption configures DialZooKeeper.
type ZooKeeperOption func(*coord.Config)

// ZooKeeperAuth authenticates the session with the cluster's digest
// credential, "user:password" ("": none), which a cluster whose servers
// and masters run with one requires to read the map.
func ZooKeeperAuth(cred string) ZooKeeperOption {
	return func(c *coord.Config) { c.Auth = cred }
}

// DialZooKeeper connects to the ensemble (servers: "host:port,...") and
// the cluster under root ("" for /tebis). A malformed credential fails
// with an error wrapping ErrZooKeeperAuth, and so does reading the map
// with a missing or wrong one.
func DialZooKeeper(ctx context.Context, servers, root string, log *zap.Logger, opts ...ZooKeeperOption) (*ZooKeeper, error) {
	cfg := coord.Config{Servers: []string{servers}, Root: root, SessionTimeout: 10 * time.Second, Log: log}
	for _, o := range opts {
		o(&cfg)
	}
	sess, err := coord.Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	z := &ZooKeeper{sess: sess}
	wctx, cancel := context.WithCancel(context.Background())
	z.cancel = cancel
	z.wg.Add(1)
	go func() {
		defer z.wg.Done()
		sess.WatchMap(wctx, func(m *regionmap.Map) {
			z.mu.Lock()
			subs := slices.Clone(z.subs)
			z.mu.Unlock()
			for _, f := range subs {
				f(m)
			}
		}, nil)
	}()
	return z, nil
}

// Load implements regionmap.Source: the map as ZooKeeper has it now.
func (z *ZooKeeper) Load(ctx context.Context) (*regionmap.Map, error) {
	m, _, err := z.sess.ReadMap(ctx)
	return m, err
}

// subscribe calls f with every new map version seen by the watch.
func (z *ZooKeeper) subscribe(f func(*regionmap.Map)) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.subs = append(z.subs, f)
}

// Close ends the session.
func (z *ZooKeeper) Close() error {
	z.cancel()
	z.sess.Close()
	z.wg.Wait()
	return nil
}
