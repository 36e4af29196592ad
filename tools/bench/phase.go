package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tebis-go/tebis/internal/procstat"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/tebis-go/tebis/tools/ycsb"
)

// PhaseResult is one engine's measurements for one workload phase.
type PhaseResult struct {
	Engine string `json:"engine"`
	// Round is the round of the engine's run (1-based; Config.Rounds).
	Round      int     `json:"round,omitempty"`
	Phase      string  `json:"phase"`
	Ops        int64   `json:"ops"`
	Seconds    float64 `json:"seconds"`     // time the operations took
	IdleWait   float64 `json:"idle_wait_s"` // waiting for background work afterwards
	OpsPerSec  float64 `json:"ops_per_sec"`
	CPUSeconds float64 `json:"cpu_seconds"` // process user+sys, incl. idle wait
	CPUPerOp   float64 `json:"cpu_us_per_op"`
	UserBytes  uint64  `json:"user_bytes"`
	Device     IOBytes `json:"device_bytes"`
	IOAmp      float64 `json:"io_amplification"`
	SpaceBytes int64   `json:"space_bytes"`
	NotFound   int64   `json:"not_found"`
	// ServerCPUSeconds is the part of CPUSeconds spent by server
	// processes (a started server, or Config.PIDs).
	ServerCPUSeconds float64 `json:"server_cpu_seconds,omitempty"`
	// ServerDevice is what Config.PIDs read from and wrote to storage
	// (/proc/PID/io read_bytes, write_bytes).
	ServerDevice IOBytes `json:"server_device_bytes,omitempty"`
	// NetBytes are the bytes the transport moved both ways (requests and
	// replies through the client); NetAmp is NetBytes / UserBytes.
	NetBytes uint64  `json:"net_bytes,omitempty"`
	NetAmp   float64 `json:"network_amplification,omitempty"`
	// EngineIO is what the servers' engines read and wrote (their own
	// count); EngineIOAmp is its total / UserBytes.
	EngineIO    IOBytes `json:"server_engine_bytes,omitempty"`
	EngineIOAmp float64 `json:"server_engine_io_amplification,omitempty"`
	// EngineIOByKind splits EngineIO by what the bytes were for (log,
	// compaction, index, gc, meta: the engine's IOCategory names).
	EngineIOByKind ioByKind `json:"server_engine_bytes_by_kind,omitempty"`
	// StallSeconds is how long the servers' writers waited for room in a
	// full L0 (writer-seconds, summed over writers and servers).
	StallSeconds float64 `json:"server_stall_seconds,omitempty"`
	// ServerPeakRSS is each of Config.PIDs' peak resident memory in bytes
	// (VmHWM) at the phase's end: the most it held since it started, not
	// only during the phase.
	ServerPeakRSS []uint64 `json:"server_peak_rss_bytes,omitempty"`
	Records       int64    `json:"records"` // after the phase

	Latency   LatencySummary            `json:"latency"`
	PerOp     map[string]LatencySummary `json:"latency_by_op"`
	Breakdown map[string]float64        `json:"engine_counters"` // cumulative
}

// UserBytesPerSec is the rate of key+value bytes during the operations.
func (r PhaseResult) UserBytesPerSec() float64 {
	if r.Seconds == 0 {
		return 0
	}
	return float64(r.UserBytes) / r.Seconds
}

// phaseEnv is what a phase runs against.
type phaseEnv struct {
	target   Target
	fs       *CountingFS
	dir      string
	threads  int
	sync     bool
	progress progress.Reporter
	rate     float64 // operations per second over all threads; 0: unpaced
	pids     []int
}

// netCounter is implemented by targets that reach their engine over a
// transport: cumulative bytes moved.
type netCounter interface {
	netBytes() uint64
}

// stallCounter is implemented by targets whose engines run in server
// processes: cumulative time their writers waited for room in L0.
type stallCounter interface {
	stallTime() time.Duration
}

// engineIOCounter is implemented by targets whose engines run in server
// processes: the bytes those engines read and wrote, counted in their file
// layer (page-cache hits included: what the engine asked of the device).
type engineIOCounter interface {
	engineIO() ioByKind
}

// ioByKind is engine bytes by what they were for (engine.IOCategory names).
type ioByKind map[string]IOBytes

// total sums every kind.
func (m ioByKind) total() IOBytes {
	var t IOBytes
	for _, b := range m {
		t.Read += b.Read
		t.Written += b.Written
	}
	return t
}

// sub returns m - o, kind by kind.
func (m ioByKind) sub(o ioByKind) ioByKind {
	d := make(ioByKind, len(m))
	for k, b := range m {
		d[k] = b.Sub(o[k])
	}
	return d
}

// pidsUsage sums the CPU and storage I/O of server processes.
func pidsUsage(pids []int) (time.Duration, IOBytes, error) {
	var cpu time.Duration
	var dev IOBytes
	for _, pid := range pids {
		c, err := procstat.CPU(pid)
		if err != nil {
			return 0, dev, err
		}
		io, err := procstat.ReadIO(pid)
		if err != nil {
			return 0, dev, err
		}
		cpu += c
		dev.Read += io.ReadBytes
		dev.Written += io.WriteBytes
	}
	return cpu, dev, nil
}

// workerStats are one worker's tallies, merged after the phase.
type workerStats struct {
	hists     OpHists
	userBytes uint64
	notFound  int64
}

// runPhase runs the generator's operations on env.threads goroutines and
// measures the phase.
func runPhase(ctx context.Context, env phaseEnv, engineName string, gen *ycsb.Generator) (PhaseResult, error) {
	w := gen.Workload()
	res := PhaseResult{Engine: engineName, Phase: w.Name, Ops: gen.Ops()}
	cpu0, err := cpuTime()
	if err != nil {
		return res, err
	}
	io0 := env.fs.Bytes()
	pu, remote := env.target.(processUsage)
	var rcpu0 time.Duration
	var rio0 IOBytes
	if remote {
		if rcpu0, rio0, err = pu.usage(); err != nil {
			return res, err
		}
	}
	pcpu0, pdev0, err := pidsUsage(env.pids)
	if err != nil {
		return res, err
	}
	nc, hasNet := env.target.(netCounter)
	var net0 uint64
	if hasNet {
		net0 = nc.netBytes()
	}
	sc, hasStall := env.target.(stallCounter)
	var stall0 time.Duration
	if hasStall {
		stall0 = sc.stallTime()
	}
	ec, hasEngineIO := env.target.(engineIOCounter)
	var eio0 ioByKind
	if hasEngineIO {
		eio0 = ec.engineIO()
	}

	var (
		claimed  atomic.Int64
		stop     atomic.Bool
		errMu    sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		stop.Store(true)
	}
	failed := func() error {
		errMu.Lock()
		defer errMu.Unlock()
		return firstErr
	}
	stats := make([]workerStats, env.threads)
	track := env.progress.Start(fmt.Sprintf("%s %s", engineName, w.Name), gen.Ops())
	cancelWatch := context.AfterFunc(ctx, func() { fail(ctx.Err()) })
	start := time.Now()
	for i := range env.threads {
		wg.Go(func() {
			wk := gen.Worker(i)
			st := &stats[i]
			var buf []byte
			for !stop.Load() {
				n := claimed.Add(1)
				if n > gen.Ops() {
					break
				}
				op := wk.Next()
				t0 := time.Now()
				if env.rate > 0 {
					// Op n is due at start + n/rate; its latency counts
					// from then, so queueing behind a slow target shows
					// (no coordinated omission).
					due := start.Add(time.Duration(float64(n-1) / env.rate * float64(time.Second)))
					if d := time.Until(due); d > 0 {
						timer := time.NewTimer(d)
						select {
						case <-timer.C:
						case <-ctx.Done():
							timer.Stop()
						}
					}
					t0 = due
				}
				var err error
				buf, err = execute(env.target, op, buf, st)
				st.hists.Record(op.Kind, time.Since(t0))
				if err == nil {
					err = wk.Ack(op)
				}
				if err != nil {
					fail(fmt.Errorf("%s %s: %v of %q: %w", engineName, w.Name, op.Kind, op.Key, err))
					return
				}
				track.Add(1)
			}
		})
	}
	wg.Wait()
	if failed() == nil && !env.sync {
		if err := env.target.Sync(); err != nil {
			fail(fmt.Errorf("%s %s: sync: %w", engineName, w.Name, err))
		}
	}
	elapsed := time.Since(start)
	cancelWatch()
	track.Done()
	if err := failed(); err != nil {
		return res, err
	}

	idleStart := time.Now()
	if err := env.target.WaitIdle(); err != nil {
		return res, fmt.Errorf("%s %s: wait idle: %w", engineName, w.Name, err)
	}
	res.IdleWait = time.Since(idleStart).Seconds()
	cpu1, err := cpuTime()
	if err != nil {
		return res, err
	}
	res.Device = env.fs.Bytes().Sub(io0)
	if remote {
		rcpu1, rio1, err := pu.usage()
		if err != nil {
			return res, err
		}
		cpu1 += rcpu1 - rcpu0
		res.ServerCPUSeconds += (rcpu1 - rcpu0).Seconds()
		res.Device = rio1.Sub(rio0)
	}
	if len(env.pids) > 0 {
		pcpu1, pdev1, err := pidsUsage(env.pids)
		if err != nil {
			return res, err
		}
		cpu1 += pcpu1 - pcpu0
		res.ServerCPUSeconds += (pcpu1 - pcpu0).Seconds()
		res.ServerDevice = pdev1.Sub(pdev0)
		for _, pid := range env.pids {
			rss, err := procstat.PeakRSS(pid)
			if err != nil {
				return res, err
			}
			res.ServerPeakRSS = append(res.ServerPeakRSS, rss)
		}
		if res.Device.Total() == 0 {
			res.Device = res.ServerDevice
		}
	}
	if hasNet {
		res.NetBytes = nc.netBytes() - net0
	}
	if hasStall {
		res.StallSeconds = (sc.stallTime() - stall0).Seconds()
	}
	if hasEngineIO {
		res.EngineIOByKind = ec.engineIO().sub(eio0)
		res.EngineIO = res.EngineIOByKind.total()
	}
	if res.SpaceBytes, err = dirSize(env.fs, env.dir); err != nil {
		return res, err
	}

	var all OpHists
	for i := range stats {
		all.Merge(&stats[i].hists)
		res.UserBytes += stats[i].userBytes
		res.NotFound += stats[i].notFound
	}
	res.Latency, res.PerOp = all.Summaries()
	res.Seconds = elapsed.Seconds()
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.CPUSeconds = (cpu1 - cpu0).Seconds()
	res.CPUPerOp = res.CPUSeconds / float64(max(res.Ops, 1)) * 1e6
	if res.UserBytes > 0 {
		res.IOAmp = float64(res.Device.Total()) / float64(res.UserBytes)
		res.NetAmp = float64(res.NetBytes) / float64(res.UserBytes)
		res.EngineIOAmp = float64(res.EngineIO.Total()) / float64(res.UserBytes)
	}
	res.Records = gen.Records()
	res.Breakdown = env.target.Breakdown()
	return res, nil
}

// execute runs one operation, counting user bytes and misses into st.
func execute(t Target, op ycsb.Op, buf []byte, st *workerStats) ([]byte, error) {
	switch op.Kind {
	case ycsb.OpInsert, ycsb.OpUpdate:
		st.userBytes += uint64(len(op.Key) + len(op.Value))
		return buf, t.Put(op.Key, op.Value)
	case ycsb.OpScan:
		_, n, err := t.Scan(op.Key, op.ScanLen)
		st.userBytes += uint64(len(op.Key)) + uint64(n)
		return buf, err
	}
	// Read, and the read half of read-modify-write.
	v, err := t.Get(buf, op.Key)
	st.userBytes += uint64(len(op.Key) + len(v))
	if errors.Is(err, ErrNotFound) {
		st.notFound++
		err = nil
	}
	if err != nil || op.Kind != ycsb.OpReadModifyWrite {
		return v, err
	}
	st.userBytes += uint64(len(op.Key) + len(op.Value))
	return v, t.Put(op.Key, op.Value)
}
