package region

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/metrics"
	"github.com/tebis-go/tebis/rdma/ring"
	"github.com/tebis-go/tebis/replication"
)

// serverCollector exports what the server, its volume, its regions and
// their replication already keep, read at scrape time (no work on the
// request path): a prometheus.Collector over Server.
type serverCollector struct{ s *Server }

var desc = metrics.NewDesc

// The scrape-time metrics. Counters restart from zero with the process;
// the replication ones with the region's stream (a re-attach).
var (
	// volume
	dVolRead      = desc("tebis_volume_read_bytes_total", "Bytes the volume read from its device, by what for (log, compaction, index, gc, meta).", "category")
	dVolWritten   = desc("tebis_volume_written_bytes_total", "Bytes the volume wrote to its device, by what for (log, compaction, index, gc, meta).", "category")
	dVolSyncs     = desc("tebis_volume_syncs_total", "fdatasync calls on the volume's segment file.")
	dVolDirect    = desc("tebis_volume_direct_written_bytes_total", "Bytes of replicas' data the volume wrote past the page cache (O_DIRECT; buffered_replica_writes).")
	dVolSegments  = desc("tebis_volume_segments", "Segments of the volume's file, by state (used, free).", "state")
	dVolHealth    = desc("tebis_volume_health", "1 for the volume's current health state (ok, no-space, failed), 0 for the others.", "state")
	dCompactions  = desc("tebis_compactions_total", "Compactions done by the volume's regions (L0 into L1 and level into level).")
	dLevelMoves   = desc("tebis_compaction_level_moves_total", "Compactions done by moving a level down without rewriting it.")
	dIndexBuilt   = desc("tebis_index_segments_built_total", "Index segments written by the volume's compactions (each shipped to Send-Index backups).")
	dStall        = desc("tebis_write_stall_seconds_total", "Time writes spent waiting for L0 room (a compaction to finish).")
	dLogSeals     = desc("tebis_log_seals_total", "Log segments that filled and were sealed.")
	dSealWaits    = desc("tebis_log_seal_waits_total", "Writes and L0 freezes that waited for replication's flow control at a log segment switch.")
	dGCRuns       = desc("tebis_gc_runs_total", "Value-log GC passes.")
	dGCRelocated  = desc("tebis_gc_relocated_bytes_total", "Bytes of live records value-log GC re-appended.")
	dGCFreed      = desc("tebis_gc_freed_segments_total", "Log segments value-log GC freed.")
	dMapVersion   = desc("tebis_map_version", "Version of the region map the server serves.")
	dRingConns    = desc("tebis_ring_connections", "Open ring connections, by listener (shm, tcp: clients; replication: primaries' commands).", "listener")
	dRingRequests = desc("tebis_ring_requests_total", "Requests the ring listener handed to handlers.", "listener")
	dRingWraps    = desc("tebis_ring_wraps_total", "Ring wraps (NOOP messages) the listener consumed.", "listener")
	dRingBroken   = desc("tebis_ring_protocol_errors_total", "Connections the ring listener closed for breaking the protocol.", "listener")

	// regions, either role
	dRole          = desc("tebis_region_role", "1 for each region the server holds, by role (primary, backup).", "region", "role")
	dL0Pairs       = desc("tebis_region_l0_pairs", "Pairs in the region's L0 taking writes.", "region")
	dL0Bytes       = desc("tebis_region_l0_bytes", "Bytes of keys and values in the region's L0 taking writes.", "region")
	dL0Fill        = desc("tebis_region_l0_fill_ratio", "How full the region's L0 is (0 to 1; it is compacted at 1).", "region")
	dCompacting    = desc("tebis_region_l0_compacting", "1 while a frozen L0 of the region is being compacted into L1.", "region")
	dLevelPairs    = desc("tebis_region_level_pairs", "Pairs an on-device level of the region indexes.", "region", "level")
	dLevelBytes    = desc("tebis_region_level_bytes", "Bytes of keys and values an on-device level of the region indexes.", "region", "level")
	dLevelSegments = desc("tebis_region_level_segments", "Index segments of an on-device level of the region.", "region", "level")
	dLogSegments   = desc("tebis_region_log_segments", "Segments of the region's value log, the tail included.", "region")

	// replication, on the primary, per backup
	dBackupUp       = desc("tebis_replication_backup_up", "1 while the backup is in the region's stream, 0 once dropped.", "region", "backup")
	dLag            = desc("tebis_replication_lag_bytes", "Log bytes the primary appended whose one-sided WRITEs to the backup have not completed (writes waiting for their acknowledgement).", "region", "backup")
	dFlushesPending = desc("tebis_replication_flushes_pending", "Buffer flushes queued for the backup or in flight.", "region", "backup")
	dCmdsPending    = desc("tebis_replication_commands_pending", "Replication commands queued for the backup or in flight, flushes included.", "region", "backup")
	dIndexPending   = desc("tebis_replication_index_segments_pending", "Index segments queued for the backup or in flight (Send-Index).", "region", "backup")
	dIndexShipped   = desc("tebis_replication_index_segments_shipped_total", "Index segments the backup applied in the region's current stream (Send-Index).", "region", "backup")
	dReplSent       = desc("tebis_replication_sent_bytes_total", "Bytes the region's current stream sent its backups: log WRITEs and commands, every backup counted.", "region")

	// replication, on a backup
	dCopyComplete   = desc("tebis_backup_copy_complete", "1 while this server's copy of the region holds every write its primary acknowledged (promotable).", "region")
	dIndexRewritten = desc("tebis_backup_index_segments_rewritten_total", "Shipped index segments this backup rewrote and wrote for the region (Send-Index), since the replica opened.", "region")
)

var allDescs = []metrics.Desc{
	dVolRead, dVolWritten, dVolSyncs, dVolDirect, dVolSegments, dVolHealth, dCompactions, dLevelMoves, dIndexBuilt, dStall,
	dLogSeals, dSealWaits, dGCRuns, dGCRelocated, dGCFreed, dMapVersion, dRingConns, dRingRequests, dRingWraps, dRingBroken,
	dRole, dL0Pairs, dL0Bytes, dL0Fill, dCompacting, dLevelPairs, dLevelBytes, dLevelSegments, dLogSegments,
	dBackupUp, dLag, dFlushesPending, dCmdsPending, dIndexPending, dIndexShipped, dReplSent,
	dCopyComplete, dIndexRewritten,
}

func (c serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d.Desc
	}
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	counter := func(d metrics.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.Desc, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d metrics.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.Desc, prometheus.GaugeValue, v, labels...)
	}

	vs := s.vol.Stats()
	for i := range vs.BytesRead {
		cat := engine.IOCategory(i).String()
		counter(dVolRead, float64(vs.BytesRead[i]), cat)
		counter(dVolWritten, float64(vs.BytesWritten[i]), cat)
	}
	counter(dVolSyncs, float64(vs.Syncs))
	gauge(dVolSegments, float64(vs.SegmentsUsed), "used")
	gauge(dVolSegments, float64(vs.SegmentsFree), "free")
	state := "ok"
	if h := s.health.cur.Load(); h != nil {
		state = h.state
	}
	for _, st := range []string{"ok", coord.HealthNoSpace, coord.HealthFailed} {
		gauge(dVolHealth, b2f(st == state), st)
	}
	counter(dVolDirect, float64(vs.DirectBytesWritten))
	counter(dCompactions, float64(vs.Compactions))
	counter(dLevelMoves, float64(vs.LevelMoves))
	counter(dIndexBuilt, float64(vs.IndexSegmentsBuilt))
	counter(dStall, vs.StallTime.Seconds())
	counter(dLogSeals, float64(vs.LogSeals))
	counter(dSealWaits, float64(vs.SealWaits))
	counter(dGCRuns, float64(vs.GCRuns))
	counter(dGCRelocated, float64(vs.GCRelocated))
	counter(dGCFreed, float64(vs.GCFreed))

	st := s.state.Load()
	if st != nil {
		gauge(dMapVersion, float64(st.m.Version))
	}
	for name, rs := range s.ringListeners() {
		rst := rs.Stats()
		gauge(dRingConns, float64(rst.Conns), name)
		counter(dRingRequests, float64(rst.Requests), name)
		counter(dRingWraps, float64(rst.Noops), name)
		counter(dRingBroken, float64(rst.Malformed), name)
	}

	if st != nil {
		for _, id := range st.hostedIDs() {
			label := strconv.FormatUint(id, 10)
			gauge(dRole, 1, label, "primary")
			c.region(ch, label, st.hosted(id).Stats())
		}
	}
	// What the region states hold, collected under replMu; the streams'
	// and replicas' own locks are taken after it is released.
	type copyOf struct {
		id  uint64
		rep *replication.Replica
	}
	var copies []copyOf
	streams := map[uint64]*replication.Shipper{}
	s.replMu.Lock()
	for id, rs := range s.regions {
		if rs.backup != nil {
			copies = append(copies, copyOf{id, rs.backup.rep})
		}
		if rs.stream != nil && rs.stream.shipper != nil {
			streams[id] = rs.stream.shipper
		}
	}
	s.replMu.Unlock()
	for _, cp := range copies {
		label := strconv.FormatUint(cp.id, 10)
		gauge(dRole, 1, label, "backup")
		// A region being promoted may be hosted as primary already: its
		// shape was sent as the primary's.
		if st == nil || st.hosted(cp.id) == nil {
			if b, ok := s.vol.Backup(cp.id); ok {
				c.region(ch, label, b.Stats())
			} else if r, ok := s.vol.Region(cp.id); ok { // a Build-Index backup's region
				c.region(ch, label, r.Stats())
			}
		}
		gauge(dCopyComplete, b2f(cp.rep.Complete()), label)
		counter(dIndexRewritten, float64(cp.rep.IndexSegmentsRewritten()), label)
	}
	for id, sh := range streams {
		if st == nil || st.hosted(id) == nil {
			continue // kept after a depose; no longer this server's stream
		}
		label := strconv.FormatUint(id, 10)
		counter(dReplSent, float64(sh.NetBytes()), label)
		for _, b := range sh.Backups() {
			gauge(dBackupUp, b2f(b.Live), label, b.Name)
			gauge(dLag, float64(b.LagBytes), label, b.Name)
			gauge(dFlushesPending, float64(b.FlushesPending), label, b.Name)
			gauge(dCmdsPending, float64(b.CommandsPending), label, b.Name)
			gauge(dIndexPending, float64(b.IndexSegmentsPending), label, b.Name)
			counter(dIndexShipped, float64(b.IndexSegmentsShipped), label, b.Name)
		}
	}
}

// region sends one region's shape.
func (c serverCollector) region(ch chan<- prometheus.Metric, label string, rs engine.RegionStats) {
	gauge := func(d metrics.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.Desc, prometheus.GaugeValue, v, labels...)
	}
	gauge(dL0Pairs, float64(rs.L0Pairs), label)
	gauge(dL0Bytes, float64(rs.L0Bytes), label)
	gauge(dL0Fill, rs.L0Fill, label)
	gauge(dCompacting, b2f(rs.Compacting), label)
	gauge(dLogSegments, float64(rs.LogSegments), label)
	for _, l := range rs.Levels {
		lv := strconv.Itoa(l.Level)
		gauge(dLevelPairs, float64(l.Pairs), label, lv)
		gauge(dLevelBytes, float64(l.KVBytes), label, lv)
		gauge(dLevelSegments, float64(l.Segments), label, lv)
	}
}

// ringListeners are the server's ring servers, by listener name.
func (s *Server) ringListeners() map[string]*ring.Server {
	out := map[string]*ring.Server{"replication": s.replRing}
	if l := s.listeners.Load(); l != nil {
		for name, rs := range *l {
			out[name] = rs
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// MetricNames are the names of the series a region server exports at
// /metrics, besides the Go runtime's and the process's (go_*, process_*).
func MetricNames() []string {
	out := []string{opsTotalName, requestErrorsName}
	out = append(out, metrics.SeriesNames(opDurationName)...)
	for _, d := range allDescs {
		out = append(out, d.Name)
	}
	return out
}
