package region_test

import (
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// logGate ends the logs of an in-process cluster before its test ends:
// some goroutines of a closed server still log (a replication mirror
// reports a drop on a goroutine of its own, replication.Mirror.OnDrop),
// and a test's log must not be written after the test.
type logGate struct {
	mu    sync.RWMutex
	ended bool
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
// once the gate closed.
func (g *logGate) logger(t *testing.T, name string) *zap.Logger {
	core := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()
	return zap.New(gatedCore{Core: core, g: g}).Named(name)
}

type gatedCore struct {
	zapcore.Core
	g *logGate
}

func (c gatedCore) With(fields []zapcore.Field) zapcore.Core {
	return gatedCore{Core: c.Core.With(fields), g: c.g}
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
	return c.Core.Write(e, fields)
}
