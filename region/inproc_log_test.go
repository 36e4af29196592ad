package region_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// logGate ends the logs of an in-process cluster before its test ends:
// some goroutines of a closed server still log (a replication mirror
// reports a drop on a goroutine of its own, replication.Mirror.OnDrop),
// and a test's log must not be written after the test. It also records
// the info entries of every logger it made (the test's log shows
// warnings and errors only), for tests to check what a server did.
type logGate struct {
	mu    sync.RWMutex
	ended bool

	recMu   sync.Mutex
	entries []logEntry
}

// logEntry is one recorded entry: when it was written, the node whose logger wrote it (the
// name given to logger), its message and its fields.
type logEntry struct {
	at     time.Time
	node   string
	msg    string
	fields map[string]any
}

// newLogGate returns a gate that closes when t's cleanups registered
// after this call have run.
func newLogGate(t *testing.T) *logGate {
	g := &logGate{}
	t.Cleanup(func() {
		g.mu.Lock()
		g.ended = true
		g.mu.Unlock()
	})
	return g
}

// logger is a test logger of warnings and errors, named name, silent
// once the gate closed; its info entries and above are recorded.
func (g *logGate) logger(t *testing.T, name string) *zap.Logger {
	core := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()
	return zap.New(gatedCore{Core: core, g: g, node: name}).Named(name)
}

// find returns the recorded entries of node with message msg that ok
// accepts (nil: all), oldest first.
func (g *logGate) find(node, msg string, ok func(logEntry) bool) []logEntry {
	g.recMu.Lock()
	defer g.recMu.Unlock()
	var out []logEntry
	for _, e := range g.entries {
		if e.node == node && e.msg == msg && (ok == nil || ok(e)) {
			out = append(out, e)
		}
	}
	return out
}

type gatedCore struct {
	zapcore.Core
	g      *logGate
	node   string
	fields []zapcore.Field // With's, recorded with each entry
}

func (c gatedCore) Enabled(l zapcore.Level) bool { return l >= zap.InfoLevel || c.Core.Enabled(l) }

func (c gatedCore) With(fields []zapcore.Field) zapcore.Core {
	return gatedCore{Core: c.Core.With(fields), g: c.g, node: c.node, fields: append(slices.Clip(c.fields), fields...)}
}

func (c gatedCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c gatedCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	c.g.mu.RLock()
	defer c.g.mu.RUnlock()
	if c.g.ended {
		return nil
	}
	if e.Level >= zap.InfoLevel {
		enc := zapcore.NewMapObjectEncoder()
		for _, f := range append(slices.Clip(c.fields), fields...) {
			f.AddTo(enc)
		}
		c.g.recMu.Lock()
		c.g.entries = append(c.g.entries, logEntry{at: e.Time, node: c.node, msg: e.Message, fields: enc.Fields})
		c.g.recMu.Unlock()
	}
	if !c.Core.Enabled(e.Level) {
		return nil
	}
	return c.Core.Write(e, fields)
}
