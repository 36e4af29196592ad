package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer lets the test read what the reporter goroutine wrote.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPlainLines(t *testing.T) {
	var out syncBuffer
	tr := Reporter{W: &out, Interval: 5 * time.Millisecond}.Start("load", 100)
	tr.Add(40)
	time.Sleep(30 * time.Millisecond)
	tr.Done()
	if got := out.String(); !strings.Contains(got, "load: 40/100 ops (40%)") {
		t.Errorf("output %q lacks the progress line", got)
	}
}

func TestBarAndSilent(t *testing.T) {
	var out syncBuffer
	tr := Reporter{W: &out, Bar: true}.Start("read", 10)
	tr.Add(10)
	tr.Done()
	if got := out.String(); !strings.Contains(got, "10/10") {
		t.Errorf("bar output %q lacks 10/10", got)
	}
	silent := Reporter{}.Start("x", 1)
	silent.Add(1)
	silent.Done()
}
