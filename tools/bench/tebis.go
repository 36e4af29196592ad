package bench

import (
	"errors"
	"fmt"

	"github.com/tebis-go/tebis/engine"
)

func init() { Register("tebis", openTebis) }

// benchRegion is the id of the single region covering all keys.
const benchRegion = 1

type tebisTarget struct {
	vol *engine.Volume
	r   *engine.Region
}

func openTebis(o TargetOptions) (Target, error) {
	mode := engine.SyncModeAsync
	if o.Sync {
		mode = engine.SyncModeSync
	}
	vol, err := engine.Open(engine.Options{
		FS:           o.FS,
		Dir:          o.Dir,
		L0Pairs:      o.L0Pairs,
		GrowthFactor: o.GrowthFactor,
		SegmentSize:  o.SegmentSize,
		SyncMode:     mode,
		Logger:       o.Logger.Named("tebis"),
	})
	if err != nil {
		return nil, fmt.Errorf("open tebis volume in %s: %w", o.Dir, err)
	}
	r, err := vol.CreateRegion(engine.RegionDesc{ID: benchRegion})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create region: %w", err), vol.Close())
	}
	return &tebisTarget{vol: vol, r: r}, nil
}

func (t *tebisTarget) Put(key, value []byte) error { return t.r.Put(key, value) }

func (t *tebisTarget) Get(dst, key []byte) ([]byte, error) {
	v, err := t.r.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return dst[:0], ErrNotFound
	}
	return v, err
}

func (t *tebisTarget) Scan(start []byte, n int) (int, int64, error) {
	it := t.r.Scan(start, nil)
	var pairs int
	var bytes int64
	for pairs < n && it.Next() {
		pairs++
		bytes += int64(len(it.Key()) + len(it.Value()))
	}
	return pairs, bytes, errors.Join(it.Err(), it.Close())
}

func (t *tebisTarget) Sync() error     { return t.r.Sync() }
func (t *tebisTarget) WaitIdle() error { return t.r.WaitIdle() }

func (t *tebisTarget) Breakdown() map[string]float64 { return engineBreakdown(t.vol.Stats()) }

// engineBreakdown is an engine's counters as Target.Breakdown reports
// them (the in-process engine's, or the servers' summed).
func engineBreakdown(st engine.Stats) map[string]float64 {
	m := map[string]float64{
		"syncs":         float64(st.Syncs),
		"compactions":   float64(st.Compactions),
		"level_moves":   float64(st.LevelMoves),
		"gc_runs":       float64(st.GCRuns),
		"stall_seconds": st.StallTime.Seconds(),
		"segments_used": float64(st.SegmentsUsed),
	}
	for c := engine.IOLog; c <= engine.IOMeta; c++ {
		m[c.String()+"_bytes_read"] = float64(st.BytesRead[c])
		m[c.String()+"_bytes_written"] = float64(st.BytesWritten[c])
	}
	return m
}

func (t *tebisTarget) Close() error { return t.vol.Close() }
