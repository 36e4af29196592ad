package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// ErrNoSession: the session could not be established in time, or was
// closed.
var ErrNoSession = errors.New("coord: no zookeeper session")

// Config configures a session.
type Config struct {
	// Servers is the ensemble: "host:port" entries, or one comma-separated
	// string.
	Servers []string
	// Root is the cluster's znode ("/tebis" when empty).
	Root string
	// SessionTimeout is the ZooKeeper session timeout (the server clamps it
	// to its own bounds); a region server or master that stays away longer
	// is declared dead. Default 2 s.
	SessionTimeout time.Duration
	Log            *zap.Logger
	// Clock is what the session's read lease is measured on (nil: the
	// system clock). If it can also wait (After, as time.After: a
	// clockwork.Clock can), the lease's renewals (KeepLease) are paced on
	// it too.
	Clock Clock
	// Auth is a digest credential, "user:password" (ReadAuthFile reads one
	// from a file). With it the session authenticates before anything
	// else, and every znode it creates (the root and its parents
	// included) can be read and changed by that identity only; without
	// it, znodes are open to anyone. Every server, master, command and
	// client of a cluster whose znodes have the credential needs it.
	Auth string
}

// Session is one ZooKeeper session (re-established by the client library
// after an expiry; Expired tells when).
type Session struct {
	conn    *zk.Conn
	root    string
	log     *zap.Logger
	timeout time.Duration // the session timeout asked for
	acl     []zk.ACL      // of every znode this session creates (auth.go)
	lease   *Lease        // revoked at every expiry; renewed by KeepLease
	// after is KeepLease's pause between renewals: Config.Clock's After
	// if it has one, else time.After.
	after func(time.Duration) <-chan time.Time
	// ensured are the directories Report found or created (a round trip
	// per path element otherwise, and a failure's reports wait on them);
	// one found gone is ensured again.
	ensured sync.Map

	mu      sync.Mutex
	events  []zk.Event // session events not yet consumed by the event loop
	wake    chan struct{}
	expired chan struct{} // closed at the next expiry, then replaced
	gen     uint64        // session generation: +1 at each expiry
	has     chan struct{} // closed once the first session is established
	hasOnce sync.Once
	done    chan struct{}
}

// Dial connects to the ensemble and waits (bounded by ctx) until a session
// is established.
func Dial(ctx context.Context, cfg Config) (*Session, error) {
	var servers []string
	for _, s := range cfg.Servers {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				servers = append(servers, p)
			}
		}
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no servers given", ErrNoSession)
	}
	if cfg.Root == "" {
		cfg.Root = "/tebis"
	}
	if !strings.HasPrefix(cfg.Root, "/") || (len(cfg.Root) > 1 && strings.HasSuffix(cfg.Root, "/")) {
		return nil, fmt.Errorf("coord: root %q: want an absolute znode path", cfg.Root)
	}
	acl, err := aclFor(cfg.Auth)
	if err != nil {
		return nil, err
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	s := &Session{root: cfg.Root, log: cfg.Log, timeout: cfg.SessionTimeout, acl: acl, lease: NewLease(cfg.Clock), after: time.After, wake: make(chan struct{}, 1),
		expired: make(chan struct{}), has: make(chan struct{}), done: make(chan struct{})}
	if w, ok := cfg.Clock.(interface {
		After(time.Duration) <-chan time.Time
	}); ok {
		s.after = w.After
	}
	// Info lines on: the one reporting the session timeout ZooKeeper
	// granted is how the lease learns it (zkLogger).
	conn, _, err := zk.Connect(servers, cfg.SessionTimeout, zk.WithEventCallback(s.onEvent),
		zk.WithLogger(zkLogger{l: cfg.Log, granted: s.granted}), zk.WithLogInfo(true))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSession, err)
	}
	s.conn = conn
	go s.loop()
	select {
	case <-s.has:
		if err := s.authenticate(ctx, cfg.Auth); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("%w: %v: %w", ErrNoSession, servers, ctx.Err())
	}
}

// onEvent runs on the library's goroutines: it only queues.
func (s *Session) onEvent(e zk.Event) {
	if e.Type != zk.EventSession {
		return // node events arrive on the watch channels
	}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop consumes session events in order.
func (s *Session) loop() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		evs := s.events
		s.events = nil
		s.mu.Unlock()
		for _, e := range evs {
			switch e.State {
			case zk.StateHasSession:
				s.hasOnce.Do(func() { close(s.has) })
				s.log.Debug("zookeeper session", zap.Int64("id", s.conn.SessionID()))
			case zk.StateExpired:
				s.log.Warn("zookeeper session expired")
				s.lease.Revoke()
				s.mu.Lock()
				close(s.expired)
				s.expired = make(chan struct{})
				s.gen++
				s.mu.Unlock()
			case zk.StateDisconnected:
				s.log.Info("zookeeper disconnected", zap.String("server", e.Server))
			}
		}
	}
}

// Expired returns a channel closed at the next session expiry.
func (s *Session) Expired() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expired
}

// Generation counts the session's expiries so far.
func (s *Session) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Connected reports whether the session is currently connected.
func (s *Session) Connected() bool { return s.conn.State() == zk.StateHasSession }

// Root is the cluster's znode.
func (s *Session) Root() string { return s.root }

// Conn is the underlying connection (for the layout functions and tests).
func (s *Session) Conn() *zk.Conn { return s.conn }

func (s *Session) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Close ends the session: its ephemeral znodes go at once.
func (s *Session) Close() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	s.lease.Revoke()
	if s.conn != nil {
		s.conn.Close()
	}
}

// granted records the session timeout ZooKeeper granted (it clamps the
// one asked for to its bounds): leases are derived from the smaller.
func (s *Session) granted(d time.Duration) {
	s.lease.SetSessionTimeout(min(d, s.timeout))
	if d != s.timeout {
		s.log.Info("zookeeper granted a different session timeout", zap.Duration("asked", s.timeout), zap.Duration("granted", d))
	}
}

// zkLogger sends the library's log lines to zap at debug level, and hands
// the session timeout of its "authenticated" line (the library exposes it
// nowhere else) to granted.
type zkLogger struct {
	l       *zap.Logger
	granted func(time.Duration)
}

// authenticatedLine is the go-zookeeper (v1.0.x) format of the line
// logged when a session is established, with the granted timeout in ms.
const authenticatedLine = "authenticated: id=%d, timeout=%d"

func (z zkLogger) Printf(f string, a ...any) {
	if f == authenticatedLine && len(a) == 2 && z.granted != nil {
		if ms, ok := a[1].(int32); ok && ms > 0 {
			z.granted(time.Duration(ms) * time.Millisecond)
		}
	}
	z.l.Sugar().Debugf("zk: "+f, a...)
}
