package torture

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tebis-go/tebis/client"
)

// recorder collects what every client operation did, for the timeline,
// the unavailability figures and the error counts. Safe for concurrent
// use.
type recorder struct {
	start time.Time

	mu      sync.Mutex
	samples []opSample
	ops     map[string]int // succeeded, by kind
	failed  map[string]int // failed, by error class
	firsts  []string       // the first unexpected errors (server errors, unclassified)
}

func newRecorder(start time.Time) *recorder {
	return &recorder{start: start, ops: map[string]int{}, failed: map[string]int{}}
}

// now is the time since the run's start.
func (r *recorder) now() time.Duration { return time.Since(r.start) }

// add records one operation on key ("" for several keys) called at call;
// err nil (or ErrNotFound, for reads) is a success.
func (r *recorder) add(kind, key string, call time.Duration, err error) {
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, opSample{At: call, Latency: ret - call, OK: err == nil, Kind: kind, Region: regionOf(key)})
	if err == nil {
		r.ops[kind]++
		return
	}
	c := errClass(err)
	r.failed[c]++
	if (c == "other" || c == "server error") && len(r.firsts) < 5 {
		r.firsts = append(r.firsts, kind+": "+err.Error())
	}
}

// regionOf is the region (1-based, in key order) of key; 0 for "".
func regionOf(key string) int {
	if key == "" {
		return 0
	}
	n := 1
	for _, s := range splits {
		if key >= s {
			n++
		}
	}
	return n
}

// errClass names the kind of a failed operation's error.
func errClass(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{{client.ErrUnavailable, "unavailable"}, {client.ErrWrongRegion, "wrong region"},
		{context.DeadlineExceeded, "timeout"}, {client.ErrServer, "server error"}, {client.ErrClosed, "closed"}} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return "other"
}
