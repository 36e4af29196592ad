package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/child"
	"github.com/tebis-go/tebis/internal/procstat"
	"github.com/tebis-go/tebis/region"
)

func init() { Register("server", openServer) }

// serverTarget runs the workload through the client against a region
// server: one it started (TargetOptions.ServerArgv, on the target's
// directory) or running ones (TargetOptions.ServerMap).
type serverTarget struct {
	cl   *client.Client
	proc *child.Process // nil for running servers
	ctx  context.Context
	// restoreProcs gives this process back the GOMAXPROCS it had
	// before open set ClientProcs (setProcs); Close calls it.
	restoreProcs func()
}

// processUsage is implemented by targets whose work happens in another
// process: the phase adds that process's CPU and system-call bytes.
type processUsage interface {
	usage() (time.Duration, IOBytes, error)
}

func openServer(o TargetOptions) (_ Target, err error) {
	t := &serverTarget{ctx: context.Background()}
	src := o.ServerMap
	if src == nil && len(o.ServerArgv) == 0 {
		return nil, fmt.Errorf("%w: the server engine needs a server map or a binary to start one", ErrBadConfig)
	}
	t.restoreProcs = setProcs(o.ClientProcs)
	defer func() {
		if err != nil {
			t.restoreProcs()
		}
	}()
	if src == nil {
		srv, err := t.spawn(o)
		if err != nil {
			return nil, err
		}
		src = regionmap.Static{M: regionmap.Single(srv)}
	}
	transport := o.ServerTransport
	if transport == "" {
		transport = "shm"
	}
	cl, err := client.Open(t.ctx, client.Config{Map: src, Transport: transport, SpinTime: o.ClientSpin,
		TLSCert: o.ServerTLS.Cert, TLSKey: o.ServerTLS.Key, TLSCA: o.ServerTLS.CA})
	if err != nil {
		return nil, errors.Join(err, t.stop())
	}
	t.cl = cl
	return t, nil
}

// spawn starts `ServerArgv... --data-dir DIR ...` and waits until it listens.
func (t *serverTarget) spawn(o TargetOptions) (regionmap.Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return regionmap.Server{}, err
	}
	tcp := l.Addr().String()
	l.Close()
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return regionmap.Server{}, err
	}
	srv := regionmap.Server{Name: "rs1", Shm: filepath.Join(dir, "server.sock"), TCP: tcp}
	args := serverArgs(o, dir, srv)
	// The server dies with this process, however it ends.
	p, err := child.Start(child.Spec{Argv: append([]string{o.ServerArgv[0]}, args...), Env: serverEnv(o, os.Environ()), Stderr: os.Stderr})
	if err != nil {
		return srv, fmt.Errorf("start server: %w", err)
	}
	t.proc = p
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitTCP(ctx, tcp); err != nil {
		if errors.Is(err, child.ErrExited) {
			t.proc = nil
			return srv, fmt.Errorf("server exited before listening: %w", err)
		}
		return srv, errors.Join(fmt.Errorf("server not listening on %s after 30s: %w", tcp, err), t.stop())
	}
	return srv, nil
}

// serverArgs are the flags of the server spawn starts in dir (after
// ServerArgv[0]). In async mode the server runs with --unsafe-lone-ack:
// its region is its only copy, and a lone primary would otherwise make
// every write durable before its reply, where the in-process engine it is
// compared with acknowledges async writes from memory; with the flag both
// do the same work and the comparison measures the serving path.
func serverArgs(o TargetOptions, dir string, srv regionmap.Server) []string {
	mode := "async"
	if o.Sync {
		mode = "sync"
	}
	args := append(append([]string(nil), o.ServerArgv[1:]...), "--data-dir", filepath.Join(dir, "data"),
		"--shm", srv.Shm, "--tcp", srv.TCP, "--sync-mode", mode)
	if !o.Sync {
		args = append(args, "--unsafe-lone-ack")
	}
	if o.L0Pairs > 0 {
		args = append(args, "--l0-pairs", strconv.Itoa(o.L0Pairs))
	}
	if o.GrowthFactor > 0 {
		args = append(args, "--growth-factor", strconv.Itoa(o.GrowthFactor))
	}
	return args
}

// serverEnv is the environment of the server spawn starts: env, with
// GOMAXPROCS set to o.ServerProcs if that is not 0 (nil: env unchanged,
// which child.Spec takes as this process's).
func serverEnv(o TargetOptions, env []string) []string {
	if o.ServerProcs == 0 {
		return nil
	}
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
	return append(out, "GOMAXPROCS="+strconv.Itoa(o.ServerProcs))
}

func (t *serverTarget) Put(key, value []byte) error { return t.cl.Put(t.ctx, key, value) }

func (t *serverTarget) Get(dst, key []byte) ([]byte, error) {
	v, err := t.cl.Get(t.ctx, key)
	if errors.Is(err, client.ErrNotFound) {
		return dst[:0], ErrNotFound
	}
	return v, err
}

func (t *serverTarget) Scan(start []byte, n int) (int, int64, error) {
	it := t.cl.Scan(t.ctx, start, nil, client.ScanOptions{BatchPairs: n})
	defer it.Close()
	var pairs int
	var bytes int64
	for pairs < n && it.Next() {
		pairs++
		bytes += int64(len(it.Key()) + len(it.Value()))
	}
	return pairs, bytes, it.Err()
}

// Sync: in sync mode every acknowledged put is durable already; the
// protocol has no remote sync, so async mode measures buffered writes.
func (t *serverTarget) Sync() error { return nil }

// WaitIdle: the server compacts on its own; there is no remote idle wait.
func (t *serverTarget) WaitIdle() error { return nil }

// Breakdown is the servers' engine counters, summed.
func (t *serverTarget) Breakdown() map[string]float64 {
	var m map[string]float64
	for _, ss := range t.serverStats() {
		if m == nil {
			m = map[string]float64{}
		}
		for k, v := range engineBreakdown(ss.Engine) {
			m[k] += v
		}
	}
	return m
}

// netBytes is what the client's transport moved both ways plus what the
// servers' primaries moved to their backups (replication).
func (t *serverTarget) netBytes() uint64 {
	st := t.cl.Stats()
	n := st.BytesSent + st.BytesReceived
	for _, ss := range t.serverStats() {
		n += ss.ReplNet
	}
	return n
}

// engineIO sums the servers' engine byte counters, by category.
func (t *serverTarget) engineIO() ioByKind {
	io := ioByKind{}
	for _, ss := range t.serverStats() {
		for i := range ss.Engine.BytesRead {
			k := engine.IOCategory(i).String()
			b := io[k]
			b.Read += ss.Engine.BytesRead[i]
			b.Written += ss.Engine.BytesWritten[i]
			io[k] = b
		}
	}
	return io
}

// stallTime sums the servers' engine stall counters.
func (t *serverTarget) stallTime() time.Duration {
	var d time.Duration
	for _, ss := range t.serverStats() {
		d += ss.Engine.StallTime
	}
	return d
}

// serverStats asks every server of the map for its counters (servers
// that do not answer are left out).
func (t *serverTarget) serverStats() []region.ServerStats {
	var out []region.ServerStats
	for _, srv := range t.cl.Map().Servers {
		b, err := t.cl.ServerStats(t.ctx, srv.Name)
		if err != nil {
			continue
		}
		var ss region.ServerStats
		if json.Unmarshal(b, &ss) == nil {
			out = append(out, ss)
		}
	}
	return out
}

// usage is the started server's CPU and read/write system-call bytes
// (file I/O; with shm the socket carries only doorbells).
func (t *serverTarget) usage() (time.Duration, IOBytes, error) {
	if t.proc == nil {
		return 0, IOBytes{}, nil
	}
	cpu, err := procstat.CPU(t.proc.PID())
	if err != nil {
		return 0, IOBytes{}, err
	}
	io, err := procstat.ReadIO(t.proc.PID())
	return cpu, IOBytes{Read: io.RChar, Written: io.WChar}, err
}

func (t *serverTarget) Close() error {
	defer t.restoreProcs()
	var err error
	if t.cl != nil {
		err = t.cl.Close()
	}
	return errors.Join(err, t.stop())
}

// setProcs sets this process's GOMAXPROCS to n (0: leaves it alone) and
// returns what gives it back the value it had; that may be called more
// than once, and only the first call restores.
func setProcs(n int) (restore func()) {
	if n <= 0 {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(n)
	var once sync.Once
	return func() { once.Do(func() { runtime.GOMAXPROCS(prev) }) }
}

// stop shuts the started server down gracefully (SIGINT, then SIGKILL
// after 30 s) and returns how it exited.
func (t *serverTarget) stop() error {
	if t.proc == nil {
		return nil
	}
	if err := t.proc.Stop(syscall.SIGINT, 30*time.Second); err != nil {
		return fmt.Errorf("server did not stop within 30s: %w", err)
	}
	return t.proc.Wait()
}
