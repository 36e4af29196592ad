package region_test

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// linKind is what a checked operation does to one key.
type linKind uint8

const (
	linGet linKind = iota
	linPut
	linDelete
)

// linInput is one operation on a register (one key): a put of a value
// unique to it, a delete, or a read. A multi-get or a scan is recorded as
// one read per key it covers, each with the multi-key operation's call and
// return times (Via says which): every key's value was read at some point
// of that interval, which is all a per-key register check needs.
type linInput struct {
	Kind       linKind
	Key, Value string
	Via        string // "get", "multi-get" or "scan" for reads
}

// linOutput is what a read returned (a write's output is ignored).
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
		switch in := input.(linInput); in.Kind {
		case linPut:
			return true, linOutput{Value: in.Value, Found: true}
		case linDelete:
			return true, linOutput{}
		default:
			return output.(linOutput) == state.(linOutput), state
		}
	},
	Equal: func(a, b any) bool { return a.(linOutput) == b.(linOutput) },
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		s := state.(linOutput)
		fmt.Fprintf(h, "%t/%s", s.Found, s.Value)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in := input.(linInput)
		switch in.Kind {
		case linPut:
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		case linDelete:
			return fmt.Sprintf("delete(%s)", in.Key)
		}
		out := output.(linOutput)
		if !out.Found {
			return fmt.Sprintf("%s(%s) -> not found", in.Via, in.Key)
		}
		return fmt.Sprintf("%s(%s) -> %s", in.Via, in.Key, out.Value)
	},
	DescribeState: func(state any) string {
		if s := state.(linOutput); s.Found {
			return s.Value
		}
		return "(not found)"
	},
}

// TestLinModelChecksDeletesAndMultiKeyReads: the register model accepts a
// read of a deleted key as not found and rejects a value coming back after
// its delete, also through a multi-get's or a scan's per-key reads.
func TestLinModelChecksDeletesAndMultiKeyReads(t *testing.T) {
	op := func(client int, in linInput, out linOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	put := linInput{Kind: linPut, Key: "a", Value: "1"}
	del := linInput{Kind: linDelete, Key: "a"}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"read after delete: not found", []porcupine.Operation{op(0, put, linOutput{}, 0, 1), op(0, del, linOutput{}, 2, 3),
			op(1, linInput{Key: "a", Via: "scan"}, linOutput{}, 4, 5)}, true},
		{"deleted value read back", []porcupine.Operation{op(0, put, linOutput{}, 0, 1), op(0, del, linOutput{}, 2, 3),
			op(1, linInput{Key: "a", Via: "scan"}, linOutput{Value: "1", Found: true}, 4, 5)}, false},
		{"multi-get read concurrent with the delete", []porcupine.Operation{op(0, put, linOutput{}, 0, 1), op(0, del, linOutput{}, 2, 6),
			op(1, linInput{Key: "a", Via: "multi-get"}, linOutput{Value: "1", Found: true}, 4, 5)}, true},
		{"indeterminate put (unbounded return) read late", []porcupine.Operation{op(0, put, linOutput{}, 0, 1<<40),
			op(1, linInput{Key: "a", Via: "get"}, linOutput{}, 4, 5), op(1, linInput{Key: "a", Via: "get"}, linOutput{Value: "1", Found: true}, 6, 7)}, true},
		{"stale read after an acknowledged overwrite", []porcupine.Operation{op(0, put, linOutput{}, 0, 1),
			op(0, linInput{Kind: linPut, Key: "a", Value: "2"}, linOutput{}, 2, 3),
			op(1, linInput{Key: "a", Via: "get"}, linOutput{Value: "1", Found: true}, 4, 5)}, false},
	} {
		if got := porcupine.CheckOperations(linModel, tc.ops); got != tc.ok {
			t.Errorf("%s: linearizable %t, want %t", tc.name, got, tc.ok)
		}
	}
}

// describeIllegal logs, per key whose history is not linearizable, the end
// of the longest linearizable prefix found and the first operations that
// could not follow it; it returns those keys.
func describeIllegal(t *testing.T, history []porcupine.Operation, info porcupine.LinearizationInfo) []string {
	t.Helper()
	var bad []string
	parts := linModel.Partition(history)
	for i, lins := range info.PartialLinearizationsOperations() {
		part := parts[i]
		key := part[0].Input.(linInput).Key
		if porcupine.CheckOperations(linModel, part) {
			continue
		}
		bad = append(bad, key)
		var longest []porcupine.Operation
		for _, l := range lins {
			if len(l) > len(longest) {
				longest = l
			}
		}
		describe := func(op porcupine.Operation) string {
			d := fmt.Sprintf("client %d [%d, %d] %s", op.ClientId, op.Call, op.Return, linModel.DescribeOperation(op.Input, op.Output))
			if op.Metadata != nil {
				d += fmt.Sprintf(" (%v)", op.Metadata)
			}
			return d
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
	return bad
}

// TestLongestOutage: the longest wait, from a moment of the window, for an
// operation called then to return.
func TestLongestOutage(t *testing.T) {
	op := func(call, ret int64) porcupine.Operation { return porcupine.Operation{Call: call, Return: ret} }
	ops := []porcupine.Operation{op(0, 1), op(2, 3), op(4, 50), op(10, 12), op(60, 61), op(62, 63)}
	// From 4+: the next call is 10 (returns 12) → 8; from 10+: the next
	// call at 60 returns 61 → 51.
	if got := longestOutage(ops, 0, 20, 100); got != 51-1 {
		t.Fatalf("outage %d, want 50", got)
	}
	if got := longestOutage(ops, 61, 70, 100); got != 100-63 {
		t.Fatalf("outage with nothing returning after the window: %d, want 37", got)
	}
}
