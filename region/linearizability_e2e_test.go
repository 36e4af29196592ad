package region_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/region/regionmap"
)

// linInput is one operation on a register (one key): a put of a value
// unique to it, or a get.
type linInput struct {
	Put        bool
	Key, Value string
}

// linOutput is what a get returned (a put's output is ignored).
type linOutput struct {
	Value string
	Found bool
}

// linModel is a map of registers, checked key by key.
var linModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(linInput).Key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range slices.Sorted(maps.Keys(byKey)) {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return linOutput{} }, // not found
	Step: func(state, input, output any) (bool, any) {
		in := input.(linInput)
		if in.Put {
			return true, linOutput{Value: in.Value, Found: true}
		}
		return output.(linOutput) == state.(linOutput), state
	},
	Equal: func(a, b any) bool { return a.(linOutput) == b.(linOutput) },
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(state.(linOutput).Value))
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in := input.(linInput)
		if in.Put {
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		}
		out := output.(linOutput)
		if !out.Found {
			return fmt.Sprintf("get(%s) -> not found", in.Key)
		}
		return fmt.Sprintf("get(%s) -> %s", in.Key, out.Value)
	},
	DescribeState: func(state any) string {
		if s := state.(linOutput); s.Found {
			return s.Value
		}
		return "(not found)"
	},
}

// linRecord is one operation as a client saw it.
type linRecord struct {
	op      porcupine.Operation
	unknown bool  // a put that failed: it may or may not have taken effect
	failed  int64 // when the client saw the failure (unknown puts)
}

// TestE2ELinearizable: 3 servers, 3-way Send-Index replication, a master.
// Clients put and get a few keys of region 1 while its primary is killed
// (SIGKILL), then the new primary too. Every operation's call and return
// times, input and output make a history that porcupine checks against a
// register per key: a put that failed has an unknown outcome (it may take
// effect at any time after its call), a get that failed is dropped.
// Afterwards every key reads as its last acknowledged put, or a put with
// an unknown outcome not followed by an acknowledged one.
func TestE2ELinearizable(t *testing.T) {
	const nClients = 6
	keys := []string{"k000100", "k001100", "k002100"} // region 1: [, k003200)
	seed := testseed.Seed(t)
	began := time.Now()
	c := startManaged(t, 3)
	t.Logf("cluster ready in %v", time.Since(began))
	for _, k := range keys {
		if c.cl.Map().Lookup([]byte(k)).ID != 1 {
			t.Fatalf("key %s is not in region 1", k)
		}
	}
	base := time.Now()
	now := func() int64 { return time.Since(base).Nanoseconds() } // monotonic

	var (
		mu      sync.Mutex
		records []linRecord
		errKind = map[string]int{}
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	stopClients := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopClients()
	for id := range nClients {
		cl := open(t, c.zs, "shm")
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(id)))
			// After a failure the client only gets until an operation
			// succeeds: each put with an unknown outcome stays open to the
			// end of the history, and the check is exponential in how
			// many of those overlap.
			failing := false
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				in := linInput{Key: keys[rng.IntN(len(keys))]}
				if !failing && rng.IntN(2) == 0 {
					in.Put, in.Value = true, fmt.Sprintf("c%d.%d", id, seq)
				}
				oc, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				var out linOutput
				var err error
				call := now()
				if in.Put {
					err = cl.Put(oc, []byte(in.Key), []byte(in.Value))
				} else {
					var v []byte
					v, err = cl.Get(oc, []byte(in.Key))
					switch {
					case err == nil:
						out = linOutput{Value: string(v), Found: true}
					case errors.Is(err, client.ErrNotFound):
						err = nil
					}
				}
				ret := now()
				cancel()
				op := porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret}
				mu.Lock()
				switch {
				case err == nil:
					records = append(records, linRecord{op: op})
				case in.Put:
					records = append(records, linRecord{op: op, unknown: true, failed: ret})
				}
				if err != nil {
					kind := "other"
					for _, e := range []error{client.ErrUnavailable, client.ErrWrongRegion, context.DeadlineExceeded} {
						if errors.Is(err, e) {
							kind = e.Error()
						}
					}
					errKind[kind]++
					if kind == "other" {
						t.Errorf("client %d: %+v: %v", id, in, err)
					}
				}
				mu.Unlock()
				failing = err != nil
				if failing {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}

	type kill struct {
		victim            string
		at, served        int64
		promoted, unavail time.Duration
	}
	var kills []kill
	time.Sleep(time.Second)
	m, err := c.zs.Load(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		r := *m.Region(1)
		victim := c.servers[r.Primary]
		t.Logf("round %d: killing %s, primary of region 1 at epoch %d", round, r.Primary, r.Epoch)
		k := kill{victim: r.Primary, at: now()}
		victim.p.Kill()
		delete(c.servers, r.Primary)
		m = c.waitMap(t, "region 1 promoted", func(m *regionmap.Map) bool {
			nr := m.Region(1)
			return nr.Primary != r.Primary && nr.Epoch > r.Epoch
		})
		k.promoted = time.Duration(now() - k.at)
		// A probe outside the history: a put to region 1 succeeds.
		for {
			pc, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := c.cl.Put(pc, []byte("k000000"), []byte(fmt.Sprint(round)))
			cancel()
			if err == nil {
				break
			}
			if time.Duration(now()-k.at) > 20*time.Second {
				t.Fatalf("region 1 not serving 20 s after its primary died: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		k.served = now()
		k.unavail = time.Duration(k.served - k.at)
		kills = append(kills, k)
		t.Logf("round %d: %s primary of region 1 at epoch %d %v after the kill; serving writes after %v",
			round, m.Region(1).Primary, m.Region(1).Epoch, k.promoted, k.unavail)
		time.Sleep(time.Second)
	}
	stopClients()
	if t.Failed() {
		t.FailNow()
	}

	// Final reads, in the history too, by a client that never saw the
	// killed servers.
	final := map[string]linOutput{}
	rd := open(t, c.zs, "shm")
	for _, k := range keys {
		fc, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		call := now()
		v, err := rd.Get(fc, []byte(k))
		ret := now()
		cancel()
		out := linOutput{Value: string(v), Found: err == nil}
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("final get %s: %v", k, err)
		}
		final[k] = out
		records = append(records, linRecord{op: porcupine.Operation{ClientId: nClients, Input: linInput{Key: k}, Call: call, Output: out, Return: ret}})
	}
	end := now() + 1

	// How long region 1 answered nothing, per kill, seen by the clients:
	// from the kill to the first successful operation called after it.
	for i, k := range kills {
		first := int64(-1)
		for _, r := range records {
			if !r.unknown && r.op.Call > k.at && (first < 0 || r.op.Return < first) {
				first = r.op.Return
			}
		}
		t.Logf("kill %d (%s): new primary published after %v, probe put served after %v, first client operation served after %v",
			i, k.victim, k.promoted, k.unavail, time.Duration(first-k.at))
	}

	var history []porcupine.Operation
	var nPut, nGet, nUnknown int
	for _, r := range records {
		op := r.op
		switch {
		case r.unknown:
			op.Return = end
			nUnknown++
		case op.Input.(linInput).Put:
			nPut++
		default:
			nGet++
		}
		history = append(history, op)
	}
	t.Logf("checking %d operations on %d keys: %d acknowledged puts, %d puts with an unknown outcome, %d gets; failed operations by error: %v",
		len(history), len(keys), nPut, nUnknown, nGet, errKind)

	// Every acknowledged put is there: each key holds a put that no
	// acknowledged put followed (an unknown one counts from its failure).
	for _, k := range keys {
		var lastAcked linRecord
		lastCall := int64(-1) // the latest call of an acknowledged put
		for _, p := range records {
			if in := p.op.Input.(linInput); in.Put && in.Key == k && !p.unknown {
				lastCall = max(lastCall, p.op.Call)
				if p.op.Return > lastAcked.op.Return {
					lastAcked = p
				}
			}
		}
		var allowed []string
		ok := false
		for _, p := range records {
			in := p.op.Input.(linInput)
			if !in.Put || in.Key != k {
				continue
			}
			ended := p.op.Return
			if p.unknown {
				ended = p.failed
			}
			if lastCall <= ended { // no acknowledged put called after p ended
				allowed = append(allowed, in.Value)
				ok = ok || (final[k].Found && final[k].Value == in.Value)
			}
		}
		if lastAcked.op.Input == nil {
			ok = ok || !final[k].Found
		}
		if !ok {
			t.Errorf("key %s reads %+v after the run; last acknowledged put %+v, allowed values %v", k, final[k], lastAcked.op.Input, allowed)
		}
	}

	start := time.Now()
	res := porcupine.CheckOperationsTimeout(linModel, history, 30*time.Second)
	t.Logf("porcupine: %s in %v", res, time.Since(start))
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Fatalf("porcupine could not decide within 30 s whether the %d operations are linearizable", len(history))
	case porcupine.Illegal:
		_, info := porcupine.CheckOperationsVerbose(linModel, history, 60*time.Second)
		var notes []porcupine.Annotation
		for i, k := range kills {
			notes = append(notes, porcupine.Annotation{Tag: "test", Start: k.at, End: k.served,
				Description: fmt.Sprintf("kill %d: %s", i, k.victim), Details: "SIGKILL to the probe put served"})
		}
		info.AddAnnotations(notes)
		f, err := os.CreateTemp("", "tebis-linearizability-*.html") // outlives the test
		if err == nil {
			err = porcupine.Visualize(linModel, info, f)
			f.Close()
		}
		if err != nil {
			t.Errorf("visualization: %v", err)
		} else {
			t.Errorf("visualization: %s", f.Name())
		}
		describeIllegal(t, history, info)
		t.Fatalf("the history of %d operations is not linearizable", len(history))
	}
}

// describeIllegal logs, per key whose history is not linearizable, the end
// of the longest linearizable prefix found and the first operations that
// could not follow it.
func describeIllegal(t *testing.T, history []porcupine.Operation, info porcupine.LinearizationInfo) {
	t.Helper()
	parts := linModel.Partition(history)
	for i, lins := range info.PartialLinearizationsOperations() {
		part := parts[i]
		key := part[0].Input.(linInput).Key
		if porcupine.CheckOperations(linModel, part) {
			continue
		}
		var longest []porcupine.Operation
		for _, l := range lins {
			if len(l) > len(longest) {
				longest = l
			}
		}
		describe := func(op porcupine.Operation) string {
			return fmt.Sprintf("client %d [%d, %d] %s", op.ClientId, op.Call, op.Return, linModel.DescribeOperation(op.Input, op.Output))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "key %s: %d operations, longest linearizable prefix %d; its last operations:\n", key, len(part), len(longest))
		for _, op := range longest[max(0, len(longest)-10):] {
			fmt.Fprintf(&b, "  %s\n", describe(op))
		}
		done := map[porcupine.Operation]bool{}
		for _, op := range longest {
			done[op] = true
		}
		var rest []porcupine.Operation
		for _, op := range part {
			if !done[op] {
				rest = append(rest, op)
			}
		}
		sort.Slice(rest, func(a, b int) bool { return rest[a].Call < rest[b].Call })
		fmt.Fprintf(&b, "first operations left out:\n")
		for _, op := range rest[:min(10, len(rest))] {
			fmt.Fprintf(&b, "  %s\n", describe(op))
		}
		t.Log(b.String())
	}
}
