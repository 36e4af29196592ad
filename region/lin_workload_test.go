package region_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tebis-go/tebis/client"
)

// The checked keys: all in region 1 ([, k003200)), the region the faults
// hit; a scan of [linScanStart, linScanEnd) covers exactly them.
const (
	linScanStart = "k000100.c"
	linScanEnd   = "k000100.d"
	linKeyCount  = 12
)

func linKeys() []string {
	var ks []string
	for i := range linKeyCount {
		ks = append(ks, fmt.Sprintf("%s%02d", linScanStart, i))
	}
	return ks
}

// linHistory collects what the checked clients saw. Times are nanoseconds
// since base (monotonic).
type linHistory struct {
	base    time.Time
	mu      sync.Mutex
	ops     []porcupine.Operation // returned reads and acknowledged writes
	unknown []porcupine.Operation // writes that failed or timed out: outcome unknown
	byKind  map[string]int        // operations that returned, by kind
	errs    map[string]int        // failed operations by error class
	samples []string              // the first unexpected errors
	lagging map[int]bool          // clients on a lagSource (set before they start)
}

func newLinHistory() *linHistory {
	return &linHistory{base: time.Now(), byKind: map[string]int{}, errs: map[string]int{}, lagging: map[int]bool{}}
}

func (h *linHistory) now() int64 { return time.Since(h.base).Nanoseconds() }

// errClass names the kind of a failed operation's error.
func errClass(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{{client.ErrUnavailable, "unavailable"}, {client.ErrWrongRegion, "wrong region"},
		{context.DeadlineExceeded, "timeout"}, {client.ErrServer, "server error"}} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return "other"
}

// record adds one client operation: for a read, one register read per key
// in reads (key -> value, "" with found false for a missing key).
func (h *linHistory) record(client int, kind string, write *linInput, reads map[string]linOutput, call, ret int64, err error) {
	var meta any
	if h.lagging[client] {
		meta = "client lagging the map"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		c := errClass(err)
		h.errs[c]++
		if (c == "other" || c == "server error") && len(h.samples) < 5 {
			h.samples = append(h.samples, fmt.Sprintf("client %d %s: %v", client, kind, err))
		}
		if write != nil { // indeterminate: it may take effect at any time after its call
			h.unknown = append(h.unknown, porcupine.Operation{ClientId: client, Input: *write, Call: call, Return: ret, Metadata: meta})
		}
		return // a failed read returned nothing
	}
	h.byKind[kind]++
	if write != nil {
		h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: *write, Call: call, Output: linOutput{}, Return: ret, Metadata: meta})
		return
	}
	for k, out := range reads {
		h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: linInput{Kind: linGet, Key: k, Via: kind}, Call: call, Output: out, Return: ret, Metadata: meta})
	}
}

// runCheckedClient runs one checked client until stop: puts of values
// unique to it, deletes, gets, multi-gets and scans of the checked keys,
// each with a 3 s deadline. After a failure it only reads until an
// operation succeeds: each failed write stays open to the end of the
// history, and the check is exponential in how many of those overlap.
func runCheckedClient(h *linHistory, id int, cl *client.Client, seed uint64, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, uint64(1000+id)))
	keys := linKeys()
	failing := false
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		p := rng.IntN(100)
		if failing {
			p = 40 + rng.IntN(60)
		}
		oc, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var (
			err   error
			write *linInput
			reads = map[string]linOutput{}
			kind  string
			call  = h.now()
		)
		switch {
		case p < 30:
			kind = "put"
			write = &linInput{Kind: linPut, Key: keys[rng.IntN(len(keys))], Value: fmt.Sprintf("c%d.%d", id, seq)}
			err = cl.Put(oc, []byte(write.Key), []byte(write.Value))
		case p < 40:
			kind = "delete"
			write = &linInput{Kind: linDelete, Key: keys[rng.IntN(len(keys))]}
			err = cl.Delete(oc, []byte(write.Key))
		case p < 65:
			kind = "get"
			k := keys[rng.IntN(len(keys))]
			var v []byte
			v, err = cl.Get(oc, []byte(k))
			switch {
			case err == nil:
				reads[k] = linOutput{Value: string(v), Found: true}
			case errors.Is(err, client.ErrNotFound):
				err, reads[k] = nil, linOutput{}
			}
		case p < 80:
			kind = "multi-get"
			var ks [][]byte
			for _, i := range rng.Perm(len(keys))[:2+rng.IntN(4)] {
				ks = append(ks, []byte(keys[i]))
			}
			var vals [][]byte
			if vals, err = cl.MultiGet(oc, ks); err == nil {
				for i, k := range ks {
					reads[string(k)] = linOutput{Value: string(vals[i]), Found: vals[i] != nil}
				}
			}
		default:
			kind = "scan"
			it := cl.Scan(oc, []byte(linScanStart), []byte(linScanEnd), client.ScanOptions{})
			for _, k := range keys {
				reads[k] = linOutput{}
			}
			for it.Next() {
				k := string(it.Key())
				if _, ok := reads[k]; !ok || !strings.HasPrefix(k, linScanStart) {
					err = fmt.Errorf("scan returned key %q outside the checked keys", k)
					break
				}
				reads[k] = linOutput{Value: string(it.Value()), Found: true}
			}
			if err == nil {
				err = it.Err()
			}
			it.Close()
		}
		ret := h.now()
		cancel()
		h.record(id, kind, write, reads, call, ret, err)
		failing = err != nil
		if failing {
			time.Sleep(10 * time.Millisecond)
		} else {
			// A short pause keeps the history checkable in seconds (the
			// check grows with the operations per key) while operations
			// still overlap every fault.
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
	}
}

// bgWriters put linBgValue-byte values to many distinct keys of region 1
// (each goroutine its own keys, so each key's writes are sequential), so
// that L0 fills and compactions, index shipping and GC run while the
// checked clients work. Every key's final value is checked afterwards.
type bgWriters struct {
	mu    sync.Mutex
	keys  map[string]*bgKey
	puts  int
	fails int
	wg    sync.WaitGroup
}

// bgKey is one background key's writes: the last acknowledged value, and
// the values whose put failed after it (any of them may be the final one).
type bgKey struct {
	acked   string
	unknown []string
}

func startBgWriters(cl *client.Client, goroutines, keysEach int, seed uint64, stop <-chan struct{}) *bgWriters {
	w := &bgWriters{keys: map[string]*bgKey{}}
	pad := strings.Repeat("x", linBgValue)
	for g := range goroutines {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(2000+g)))
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("k001000.b%d.%06d", g, rng.IntN(keysEach))
				v := fmt.Sprintf("b%d.%d|", g, seq)
				v += pad[:linBgValue-len(v)]
				oc, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				err := cl.Put(oc, []byte(k), []byte(v))
				cancel()
				w.mu.Lock()
				bk := w.keys[k]
				if bk == nil {
					bk = &bgKey{}
					w.keys[k] = bk
				}
				if err == nil {
					bk.acked, bk.unknown = v, nil
					w.puts++
				} else {
					bk.unknown = append(bk.unknown, v)
					w.fails++
				}
				w.mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	return w
}

// verify reads every background key after the writers stopped: each holds
// its last acknowledged value or a later unacknowledged one (none written:
// not found). It returns the violations (acknowledged writes lost, older
// values back).
func (w *bgWriters) verify(t *testing.T, cl *client.Client) []string {
	t.Helper()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys [][]byte
	for k := range w.keys {
		keys = append(keys, []byte(k))
	}
	var bad []string
	for len(keys) > 0 {
		n := min(len(keys), 64)
		batch := keys[:n]
		keys = keys[n:]
		var vals [][]byte
		var err error
		for try := 0; try < 20; try++ {
			c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			vals, err = cl.MultiGet(c, batch)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("reading the background keys back: %v", err)
			return bad
		}
		for i, k := range batch {
			bk := w.keys[string(k)]
			got := string(vals[i])
			ok := got == bk.acked && (vals[i] != nil || bk.acked == "")
			for _, u := range bk.unknown {
				ok = ok || got == u
			}
			if !ok {
				bad = append(bad, fmt.Sprintf("background key %s reads %.12q (found %t); last acknowledged %.12q, unacknowledged after it %d",
					k, got, vals[i] != nil, bk.acked, len(bk.unknown)))
			}
		}
	}
	return bad
}
