package replication

import (
	"slices"
	"strings"

	"github.com/tebis-go/tebis/engine"
)

// BackupStats is one backup of a region's stream as its primary sees it.
type BackupStats struct {
	Name string
	// Live: the backup was not dropped from the stream.
	Live bool
	// LagBytes are the bytes of the log tail the primary appended whose
	// WRITEs to this backup have not completed: writes waiting for their
	// acknowledgement on it (0 for a dropped backup).
	LagBytes int64
	// FlushesPending are the buffer flushes queued for the backup or in
	// flight (a sealed segment or the partial flush before an L0
	// compaction, not yet persisted there); CommandsPending every
	// command, flushes included; IndexSegmentsPending the index
	// segments among them (Send-Index).
	FlushesPending       int
	CommandsPending      int
	IndexSegmentsPending int
	// IndexSegmentsShipped counts the index segments the backup applied
	// in this stream (Send-Index).
	IndexSegmentsShipped uint64
}

// lagBytes is how far a backup's completed WRITEs trail a tail of
// appended bytes in generation gen: its acknowledgement counts only in
// the same generation, and the segment header is never mirrored.
func lagBytes(appended int64, gen uint64, ackGen uint64, acked int64) int64 {
	floor := int64(engine.SegmentHeaderSize)
	if ackGen == gen {
		floor = max(floor, acked)
	}
	return max(appended-floor, 0)
}

// lag reports, per live backup, lagBytes of the current tail, after
// collecting the completions queued so far.
func (m *Mirror) lag() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pollLocked()
	out := make(map[string]int64, len(m.backups))
	for _, b := range m.backups {
		if !b.dropped {
			out[b.Name] = lagBytes(m.appended, m.gen, b.ackGen, b.acked)
		}
	}
	return out
}

// Backups reports every backup of the stream, by name. It takes the shipper's and the mirror's locks
// briefly (one look each).
func (s *Shipper) Backups() []BackupStats {
	lag := s.cfg.Mirror.lag()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]BackupStats, 0, len(s.backups))
	for _, b := range s.backups {
		l, live := lag[b.name]
		st := BackupStats{Name: b.name, Live: live && !b.dead, LagBytes: l, IndexSegmentsShipped: b.shipped}
		if !st.Live {
			st.LagBytes = 0
		}
		for _, c := range b.queue {
			st.CommandsPending++
			switch c.Kind {
			case CmdFlush:
				st.FlushesPending++
			case CmdIndexSegment:
				st.IndexSegmentsPending++
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b BackupStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}
