package master

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/region"
)

// The master's HTTP endpoints (Config.HTTP; off when empty):
//
//   - /healthz: 200 "ok" while the master runs and its ZooKeeper session
//     is connected; 503 with the reason otherwise;
//   - /readyz: 200 "ready: leader" while, leading, its last decision
//     read a valid region map; 200 "ready: standby (leader: NAME)" while
//     another candidate leads (it takes over when that one goes); 503
//     with the reasons otherwise (not connected; leading without a valid
//     map read, e.g. before `tebis cluster init`);
//   - /: the status page (page.go), the cluster as this master sees it;
//   - Config.Handlers, mounted as given.
//
// Answers are plain text, one reason per line, except the page.

// fetchTimeout bounds the status page's reads of the region servers'
// statuses and of ZooKeeper.
const fetchTimeout = time.Second

// serveHTTP starts the HTTP listener if configured: it returns a func
// that stops it and the address it listens on ("" when off).
func serveHTTP(cfg Config, b *board) (stop func(), addr string, err error) {
	if cfg.HTTP == "" {
		return func() {}, "", nil
	}
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return nil, "", fmt.Errorf("master: listen http %s: %w", cfg.HTTP, err)
	}
	srv := &http.Server{Handler: handler(cfg, b), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Error("http listener failed", zap.Error(err))
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ln.Close()
	}, ln.Addr().String(), nil
}

// handler is the master's HTTP mux.
func handler(cfg Config, b *board) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, unhealthy(cfg), "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		reasons := unhealthy(cfg)
		snap := b.snapshot()
		ok := "ready: leader"
		switch {
		case snap.Leading && !snap.Validated:
			why := "leading; no valid region map read (yet, or in its last decision)"
			if snap.MapErr != "" {
				why += ": " + snap.MapErr
			}
			reasons = append(reasons, why)
		case !snap.Leading:
			ctx, cancel := context.WithTimeout(r.Context(), fetchTimeout)
			leader, err := cfg.Coord.Leader(ctx)
			cancel()
			if err != nil {
				reasons = append(reasons, fmt.Sprintf("standby; the leader is unknown: %v", err))
			}
			ok = fmt.Sprintf("ready: standby (leader: %s)", leader)
		}
		answer(w, reasons, ok)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		p := gather(r.Context(), cfg, b)
		var buf bytes.Buffer
		if err := statusPage.Execute(&buf, p); err != nil {
			cfg.Log.Warn("status page not rendered", zap.Error(err))
			http.Error(w, "status page not rendered: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(buf.Bytes())
	})
	for pattern, h := range cfg.Handlers {
		mux.Handle(pattern, h)
	}
	return mux
}

// unhealthy lists why the master is not healthy (none: healthy).
func unhealthy(cfg Config) []string {
	if !cfg.Coord.Connected() {
		return []string{"zookeeper session not connected"}
	}
	return nil
}

// answer writes ok (200) when reasons is empty, else the reasons (503).
func answer(w http.ResponseWriter, reasons []string, ok string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(reasons) == 0 {
		fmt.Fprintln(w, ok)
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, strings.Join(reasons, "\n"))
}

// gather reads what the status page shows: the board, the masters
// announced, and the live region servers' statuses (in parallel, each
// bounded by fetchTimeout).
func gather(ctx context.Context, cfg Config, b *board) page {
	snap := b.snapshot()
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	in := pageInput{Self: cfg.Name, Snap: snap, Now: cfg.Now(), Statuses: map[string]fetched{}}
	var err error
	if in.Masters, err = cfg.Coord.Masters(ctx); err != nil {
		in.MastersErr = err.Error()
	}
	if in.Leader, err = cfg.Coord.Leader(ctx); err != nil {
		in.Leader = "unknown: " + err.Error()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, si := range snap.Live {
		if si.HTTP == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := cfg.Fetch(ctx, si.HTTP)
			mu.Lock()
			in.Statuses[name] = fetched{Status: st, Err: err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return buildPage(in)
}

// maxStatus bounds a region server's /status.json the master reads.
const maxStatus = 4 << 20

// statusClient fetches the servers' statuses: it follows no redirect
// (the addresses come from ZooKeeper registrations: a fetch goes to
// host:port/status.json and nowhere else).
var statusClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// fetchStatus GETs a region server's /status.json; addr must be a
// host:port, and the answer at most maxStatus bytes.
func fetchStatus(ctx context.Context, addr string) (region.Status, error) {
	var st region.Status
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || strings.ContainsAny(addr, "/?#@") {
		return st, fmt.Errorf("status of %q: not a host:port", addr)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status.json", nil)
	if err != nil {
		return st, err
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("/status.json: %s", resp.Status)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, maxStatus)).Decode(&st)
	return st, err
}
