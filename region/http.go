package region

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/internal/metrics"
)

// The region server's HTTP endpoints (Config.HTTP; off when empty), for
// an operator's probes and load balancers:
//
//   - /healthz: 200 "ok" while the server runs and its volume stores
//     writes; 503 with the reason otherwise (shutting down, the volume's
//     health state and error);
//   - /readyz: 200 "ready" when it serves what the map gives it: healthy;
//     managed, registered, its installed map made for this run and its
//     read lease held; every region the map names it primary of served,
//     none waiting for its backups (attaching) or refused as an
//     incomplete copy. 503 lists every reason otherwise;
//   - /metrics: the server's Prometheus metrics (metrics.go: the request
//     path's; collector.go: the volume's, the regions' and their
//     replication's, read at scrape time; the Go runtime's and the
//     process's);
//   - /status.json: the server's Status (JSON), what the master's status
//     page shows of it;
//   - /: the same as an HTML page (status.html).
//
// The probes answer in plain text, one reason per line. All answer from
// early in Start (before the map is loaded or the server registers)
// until Close.

// serveHTTP starts the HTTP listener, if configured.
func (s *Server) serveHTTP() error {
	if s.cfg.HTTP == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("region: listen http %s: %w", s.cfg.HTTP, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { answer(w, s.unhealthy(), "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { answer(w, s.unready(), "ready") })
	mux.Handle("GET /metrics", metrics.Handler(s.registry))
	mux.HandleFunc("GET /status.json", s.serveStatus)
	mux.HandleFunc("GET /{$}", s.servePage)
	s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.httpLn, s.httpAddr = ln, ln.Addr().String()
	go func() {
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http listener failed", zap.Error(err))
		}
	}()
	return nil
}

// advertisedHTTP is the HTTP address a server registers for the master's
// status page and `tebis cluster health`: the one it listens on, except
// that a wildcard host (":9090", "0.0.0.0:9090", "[::]:9090"), which
// would name the reader's own host, takes the host of its tcp address
// when that one is specific.
func advertisedHTTP(listen, tcp string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return listen
	}
	th, _, err := net.SplitHostPort(tcp)
	if ip := net.ParseIP(th); err != nil || th == "" || ip != nil && ip.IsUnspecified() {
		return listen
	}
	return net.JoinHostPort(th, port)
}

// HTTPAddr is the address the HTTP endpoints listen on ("": off).
func (s *Server) HTTPAddr() string { return s.httpAddr }

// closeHTTP stops the HTTP listener, if any.
func (s *Server) closeHTTP() {
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.httpSrv.Shutdown(ctx)
		cancel()
		s.httpLn.Close() // if Serve had not started yet
	}
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

// unhealthy lists why the server is not healthy (none: healthy).
func (s *Server) unhealthy() []string {
	var out []string
	if s.closed.Load() {
		out = append(out, "shutting down")
	}
	if h := s.health.cur.Load(); h != nil {
		out = append(out, fmt.Sprintf("volume %s: %v", h.state, h.err))
	}
	return out
}

// unready lists why the server does not serve what its map gives it
// (none: ready).
func (s *Server) unready() []string {
	out := s.unhealthy()
	st := s.state.Load()
	managed := s.cfg.Zookeeper != ""
	switch {
	case managed && !s.joined.Load():
		return append(out, "not registered with the cluster yet")
	case st == nil:
		return append(out, "no region map installed")
	}
	if managed {
		if !s.cluster.knows(st.m, s.cfg.Name) {
			out = append(out, fmt.Sprintf("the installed map (version %d) does not name this run of the server yet", st.m.Version))
		}
		if !s.leaseHolds() {
			out = append(out, "read lease lapsed (zookeeper session not confirmed alive)")
		}
	}
	if !managed || s.cluster.knows(st.m, s.cfg.Name) {
		var unserved []uint64
		for _, r := range st.m.Regions {
			if how := st.routes[r.ID].how; r.Serving(s.cfg.Name) && (how == 0 || how == routeWithdrawn) {
				unserved = append(unserved, r.ID)
			}
		}
		if len(unserved) > 0 {
			out = append(out, fmt.Sprintf("regions the map names this server primary of, not served: %v", unserved))
		}
	}
	if ids := st.attachingIDs(); len(ids) > 0 {
		out = append(out, fmt.Sprintf("regions waiting for their backups: %v", ids))
	}
	if ids := st.ids(routeIncomplete); len(ids) > 0 {
		out = append(out, fmt.Sprintf("regions named primary of whose copy here is incomplete: %v", ids))
	}
	return out
}
