package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

func init() { Register("pebble", openPebble) }

// Pebble settings chosen to match the tebis engine: the same cache budget
// (64 MiB, the engine's default), memtables about the size of the engine's
// L0 (L0Pairs pairs of the workload's mean size, within [4 MiB, 256 MiB]),
// and value separation into blob files for values of blobMinValue bytes
// and more (tebis separates every value).
const (
	pebbleCacheBytes = 64 << 20
	blobMinValue     = 64
)

type pebbleTarget struct {
	db *pebble.DB
	wo *pebble.WriteOptions
}

func openPebble(o TargetOptions) (Target, error) {
	cache := pebble.NewCache(pebbleCacheBytes)
	defer cache.Unref()
	memtable := min(max(int64(o.L0Pairs)*int64(o.MeanPairSize), 4<<20), 256<<20)
	opts := &pebble.Options{
		FS:                 o.FS,
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       uint64(memtable),
		Logger:             zapPebbleLogger{o.Logger.Sugar().Named("pebble")},
	}
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           blobMinValue,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	db, err := pebble.Open(o.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble in %s: %w", o.Dir, err)
	}
	wo := pebble.NoSync
	if o.Sync {
		wo = pebble.Sync
	}
	return &pebbleTarget{db: db, wo: wo}, nil
}

func (t *pebbleTarget) Put(key, value []byte) error { return t.db.Set(key, value, t.wo) }

func (t *pebbleTarget) Get(dst, key []byte) ([]byte, error) {
	v, closer, err := t.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst[:0], ErrNotFound
	}
	if err != nil {
		return dst[:0], err
	}
	dst = append(dst[:0], v...)
	return dst, closer.Close()
}

func (t *pebbleTarget) Scan(start []byte, n int) (int, int64, error) {
	it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: start})
	if err != nil {
		return 0, 0, err
	}
	var pairs int
	var bytes int64
	for ok := it.First(); ok && pairs < n; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return pairs, bytes, err
		}
		pairs++
		bytes += int64(len(it.Key()) + len(v))
	}
	return pairs, bytes, it.Close()
}

// Sync writes an empty, synced WAL record: it returns once every earlier
// write is durable.
func (t *pebbleTarget) Sync() error { return t.db.LogData(nil, pebble.Sync) }

// WaitIdle polls until no flush or compaction has run for a few polls.
func (t *pebbleTarget) WaitIdle() error {
	const poll, quietPolls, limit = 20 * time.Millisecond, 5, 10 * time.Minute
	quiet := 0
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(poll) {
		m := t.db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if quiet >= quietPolls {
			return nil
		}
	}
	return fmt.Errorf("pebble still compacting after %v", limit)
}

func (t *pebbleTarget) Breakdown() map[string]float64 {
	m := t.db.Metrics()
	var tot pebble.LevelMetrics // not m.Total(), which folds WAL bytes into "flushed"
	for i := range m.Levels {
		tot.Add(&m.Levels[i])
	}
	return map[string]float64{
		"wal_bytes_written":   float64(m.WAL.BytesWritten),
		"table_bytes_flushed": float64(tot.TableBytesFlushed),
		"table_bytes_compact": float64(tot.TableBytesCompacted),
		"blob_bytes_flushed":  float64(tot.BlobBytesFlushed),
		"blob_bytes_compact":  float64(tot.BlobBytesCompacted),
		"table_bytes_read":    float64(tot.TableBytesRead),
		"flushes":             float64(m.Flush.Count),
		"compactions":         float64(m.Compact.Count),
		"read_amp":            float64(m.ReadAmp()),
	}
}

func (t *pebbleTarget) Close() error { return t.db.Close() }

// zapPebbleLogger routes pebble's logs to zap. Pebble expects Fatalf not to
// return; it panics rather than exiting the process.
type zapPebbleLogger struct{ s *zap.SugaredLogger }

func (l zapPebbleLogger) Infof(format string, args ...any)  { l.s.Debugf(format, args...) }
func (l zapPebbleLogger) Errorf(format string, args ...any) { l.s.Errorf(format, args...) }
func (l zapPebbleLogger) Fatalf(format string, args ...any) {
	l.s.Errorf(format, args...)
	panic(fmt.Sprintf("pebble: "+format, args...))
}
