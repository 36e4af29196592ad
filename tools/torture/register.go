package torture

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tebis-go/tebis/client"
)

// regKind is what a register operation does to its key.
type regKind uint8

const (
	regGet regKind = iota
	regPut
	regDelete
)

// regInput is one operation on one register (key): a put of a value
// unique to it, a delete, or a read. A multi-get is recorded as one read
// per key, each with the multi-get's call and return times.
type regInput struct {
	Kind       regKind
	Key, Value string
	Via        string // "get" or "multi-get" for reads
}

// regOutput is what a read returned.
type regOutput struct {
	Value string
	Found bool
}

// registerModel is a map of registers, checked key by key.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(regInput).Key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range slices.Sorted(maps.Keys(byKey)) {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return regOutput{} },
	Step: func(state, input, output any) (bool, any) {
		switch in := input.(regInput); in.Kind {
		case regPut:
			return true, regOutput{Value: in.Value, Found: true}
		case regDelete:
			return true, regOutput{}
		default:
			return output.(regOutput) == state.(regOutput), state
		}
	},
	Equal: func(a, b any) bool { return a.(regOutput) == b.(regOutput) },
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		s := state.(regOutput)
		fmt.Fprintf(h, "%t/%s", s.Found, s.Value)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		switch in.Kind {
		case regPut:
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		case regDelete:
			return fmt.Sprintf("delete(%s)", in.Key)
		}
		if out := output.(regOutput); out.Found {
			return fmt.Sprintf("%s(%s) -> %s", in.Via, in.Key, out.Value)
		}
		return fmt.Sprintf("%s(%s) -> not found", in.Via, in.Key)
	},
}

// registerKeys are the register workload's keys, over every region.
func registerKeys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%d.reg.%04d", i%10, i)
	}
	return out
}

// registerLoad is the register workload: clients doing puts, deletes,
// gets and multi-gets on a few hundred keys, every operation recorded for
// the per-key linearizability check.
type registerLoad struct {
	rec  *recorder
	keys []string

	mu      sync.Mutex
	history []porcupine.Operation // returned reads and acknowledged writes
	unknown []porcupine.Operation // writes that failed: they may take effect at any later time
}

// run runs one client until ctx ends. After a failure it only reads until
// an operation succeeds: each failed write stays open to the end of the
// history, and the check is exponential in how many overlap on a key.
func (w *registerLoad) run(ctx context.Context, id int, cl *client.Client, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(1000+id)))
	failing := false
	for seq := 0; ctx.Err() == nil; seq++ {
		p := rng.IntN(100)
		if failing {
			p = 40 + rng.IntN(60)
		}
		oc, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var (
			err   error
			write *regInput
			reads = map[string]regOutput{}
			kind  string
			key   string // the key of a single-key operation
			call  = w.rec.now()
		)
		switch {
		case p < 30:
			kind = "put"
			write = &regInput{Kind: regPut, Key: w.keys[rng.IntN(len(w.keys))], Value: fmt.Sprintf("c%d.%d", id, seq)}
			key = write.Key
			err = cl.Put(oc, []byte(write.Key), []byte(write.Value))
		case p < 40:
			kind = "delete"
			write = &regInput{Kind: regDelete, Key: w.keys[rng.IntN(len(w.keys))]}
			key = write.Key
			err = cl.Delete(oc, []byte(write.Key))
		case p < 70:
			kind = "get"
			k := w.keys[rng.IntN(len(w.keys))]
			key = k
			var v []byte
			v, err = cl.Get(oc, []byte(k))
			switch {
			case err == nil:
				reads[k] = regOutput{Value: string(v), Found: true}
			case errors.Is(err, client.ErrNotFound):
				err, reads[k] = nil, regOutput{}
			}
		default:
			kind = "multi-get"
			var ks [][]byte
			for _, i := range rng.Perm(len(w.keys))[:2+rng.IntN(4)] {
				ks = append(ks, []byte(w.keys[i]))
			}
			var vals [][]byte
			if vals, err = cl.MultiGet(oc, ks); err == nil {
				for i, k := range ks {
					reads[string(k)] = regOutput{Value: string(vals[i]), Found: vals[i] != nil}
				}
			}
		}
		cancel()
		w.rec.add(kind, key, call, err)
		w.record(id, kind, write, reads, call.Nanoseconds(), w.rec.now().Nanoseconds(), err)
		failing = err != nil
		if failing {
			sleep(ctx, 20*time.Millisecond)
		} else {
			// A pause keeps each key's history checkable (a few hundred
			// operations per key in a 5-minute run) while operations still
			// overlap every fault.
			sleep(ctx, time.Duration(rng.IntN(8000))*time.Microsecond)
		}
	}
}

func (w *registerLoad) record(id int, kind string, write *regInput, reads map[string]regOutput, call, ret int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if write != nil {
			w.unknown = append(w.unknown, porcupine.Operation{ClientId: id, Input: *write, Call: call, Return: ret})
		}
		return
	}
	if write != nil {
		w.history = append(w.history, porcupine.Operation{ClientId: id, Input: *write, Output: regOutput{}, Call: call, Return: ret})
		return
	}
	for k, out := range reads {
		w.history = append(w.history, porcupine.Operation{ClientId: id, Input: regInput{Kind: regGet, Key: k, Via: kind}, Output: out, Call: call, Return: ret})
	}
}

// registerHistory is the history the register check searches: the
// returned reads and acknowledged writes, and the indeterminate writes,
// which may take effect at any time after their call. Values are unique
// to their put, so three rewrites keep every linearization and shrink the
// search, which is exponential in the writes open at once:
//   - an indeterminate put whose value no read returned is left out: it
//     can take effect after every other operation, where it changes
//     nothing observed; and if a linearization places it earlier, no read
//     sits between it and the next write, so the rest stays one without
//     it;
//   - an indeterminate put whose value a read returned took effect before
//     that read returned: its return is the earliest such read's return
//     (if that is not after its call, the read is illegal either way and
//     the put stays open);
//   - an indeterminate delete is left out when every read returning "not
//     found" returned before its call (for the same reason); else it stays
//     open to the end.
//
// Without them a stale read with ten such puts open on its key already
// takes porcupine past any bound: a violation would be reported undecided.
func registerHistory(acked, unknown []porcupine.Operation) []porcupine.Operation {
	h := slices.Clone(acked)
	type read struct{ key, value string }
	seen := map[read]int64{}     // a value read: the earliest return of a read of it
	absent := map[string]int64{} // a key read as not found: the latest return of such a read
	for _, op := range acked {
		in := op.Input.(regInput)
		if in.Kind != regGet {
			continue
		}
		out := op.Output.(regOutput)
		if !out.Found {
			absent[in.Key] = max(absent[in.Key], op.Return)
			continue
		}
		k := read{in.Key, out.Value}
		if r, ok := seen[k]; !ok || op.Return < r {
			seen[k] = op.Return
		}
	}
	for _, op := range unknown {
		in := op.Input.(regInput)
		op.Return = math.MaxInt64 / 2
		if in.Kind == regPut {
			r, ok := seen[read{in.Key, in.Value}]
			if !ok {
				continue
			}
			if r > op.Call {
				op.Return = r
			}
		} else if r, ok := absent[in.Key]; !ok || r < op.Call {
			continue
		}
		h = append(h, op)
	}
	return h
}

// registerResult is the register check's outcome.
type registerResult struct {
	checked   int      // operations checked (indeterminate writes included)
	bad       []string // keys whose history is not linearizable
	unknown   bool     // a key's check timed out: neither proved nor refuted
	undecided []string // those keys
}

// check checks every key's history (registerHistory), each within
// timeout, two keys at a time. A key whose check times out
// leaves the result unknown. On a violation it writes porcupine's
// visualization of the keys not linearizable into dir (only theirs: the
// partial linearizations of a whole long history would not fit in
// memory).
func (w *registerLoad) check(dir string, timeout time.Duration) (registerResult, error) {
	w.mu.Lock()
	h := registerHistory(w.history, w.unknown)
	checked := len(w.history) + len(w.unknown)
	w.mu.Unlock()
	res := registerResult{checked: checked}
	parts := registerModel.Partition(h)
	verdicts := make([]porcupine.CheckResult, len(parts))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				verdicts[i] = porcupine.CheckOperationsTimeout(registerModel, parts[i], timeout)
			}
		}()
	}
	for i := range parts {
		next <- i
	}
	close(next)
	wg.Wait()
	var bad []porcupine.Operation
	var undecided strings.Builder
	for i, v := range verdicts {
		switch v {
		case porcupine.Unknown:
			res.unknown = true
			key := parts[i][0].Input.(regInput).Key
			res.undecided = append(res.undecided, key)
			fmt.Fprintf(&undecided, "key %s: %d operations\n", key, len(parts[i]))
			for _, op := range parts[i] {
				fmt.Fprintf(&undecided, "  client %d [%d, %d] %s\n", op.ClientId, op.Call, op.Return, registerModel.DescribeOperation(op.Input, op.Output))
			}
		case porcupine.Illegal:
			res.bad = append(res.bad, parts[i][0].Input.(regInput).Key)
			bad = append(bad, parts[i]...)
		}
	}
	if len(bad) == 0 && undecided.Len() == 0 {
		return res, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("torture: %w", err)
	}
	if undecided.Len() > 0 {
		// The histories the check could not decide, for a longer check.
		const note = "# as searched (registerHistory): indeterminate writes no read observed are left out; an indeterminate\n" +
			"# put's return is the earliest return of a read of its value; other indeterminate writes return at 4611686018427387903\n"
		if err := os.WriteFile(filepath.Join(dir, "register-undecided.txt"), []byte(note+undecided.String()), 0o644); err != nil {
			return res, fmt.Errorf("torture: %w", err)
		}
	}
	if len(bad) == 0 {
		return res, nil
	}
	_, info := porcupine.CheckOperationsVerbose(registerModel, bad, timeout)
	if err := porcupine.VisualizePath(registerModel, info, filepath.Join(dir, "register-linearizability.html")); err != nil {
		return res, fmt.Errorf("torture: porcupine visualization: %w", err)
	}
	return res, nil
}
