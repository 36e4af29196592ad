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

// DialZooKeeper connects to the ensemble (servers: "host:port,...") and
// the cluster under root ("" for /tebis).
func DialZooKeeper(ctx context.Context, servers, root string, log *zap.Logger) (*ZooKeeper, error) {
	sess, err := coord.Dial(ctx, coord.Config{Servers: []string{servers}, Root: root, SessionTimeout: 10 * time.Second, Log: log})
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
