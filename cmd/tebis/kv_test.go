package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/client"
	"github.com/urfave/cli/v2"
)

// fakeStore is a kvStore over a map.
type fakeStore struct{ m map[string]string }

func (f *fakeStore) Put(_ context.Context, k, v []byte) error { f.m[string(k)] = string(v); return nil }
func (f *fakeStore) Get(_ context.Context, k []byte) ([]byte, error) {
	v, ok := f.m[string(k)]
	if !ok {
		return nil, client.ErrNotFound
	}
	return []byte(v), nil
}
func (f *fakeStore) Delete(_ context.Context, k []byte) error { delete(f.m, string(k)); return nil }
func (f *fakeStore) Scan(context.Context, []byte, []byte) kvIterator {
	panic("not used")
}
func (f *fakeStore) Close() error { return nil }

// runKV runs `tebis args...` against store (nil: opening fails) and
// returns stdout, what main would print on stderr, and the exit status.
func runKV(t *testing.T, store kvStore, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	old := openKVStore
	t.Cleanup(func() { openKVStore = old })
	openKVStore = func(*cli.Context) (kvStore, error) {
		if store == nil {
			return nil, fmt.Errorf("%w: no server", client.ErrUnavailable)
		}
		return store, nil
	}
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.RunContext(context.Background(), append([]string{"tebis"}, args...))
	if err != nil {
		fmt.Fprintln(&errOut, "tebis:", err)
	}
	return out.String(), errOut.String(), exitStatus(err)
}

// TestKVExitStatus: a missing key prints nothing on stdout, a short
// message, and exits 1; usage errors exit 2; other failures 3.
func TestKVExitStatus(t *testing.T) {
	st := &fakeStore{m: map[string]string{}}
	if out, errOut, status := runKV(t, st, "kv", "put", "k", "v"); status != 0 || out != "ok\n" {
		t.Fatalf("put: status %d, stdout %q, stderr %q", status, out, errOut)
	}
	if out, errOut, status := runKV(t, st, "kv", "get", "k"); status != 0 || out != "v\n" {
		t.Fatalf("get: status %d, stdout %q, stderr %q", status, out, errOut)
	}
	out, errOut, status := runKV(t, st, "kv", "get", "absent")
	if status != exitNotFound || out != "" || errOut != "tebis: key \"absent\" not found\n" {
		t.Fatalf("get of a missing key: status %d, stdout %q, stderr %q", status, out, errOut)
	}
	out, errOut, status = runKV(t, st, "kv", "get", "--json", "absent")
	if status != exitNotFound || !strings.Contains(out, `"not_found": true`) {
		t.Fatalf("get --json of a missing key: status %d, stdout %q, stderr %q", status, out, errOut)
	}
	out, errOut, status = runKV(t, nil, "kv", "get", "k")
	if status != exitFailure || out != "" || !strings.Contains(errOut, "no server") {
		t.Fatalf("get without a server: status %d, stdout %q, stderr %q", status, out, errOut)
	}
}

// TestKVUsage: wrong argument counts, unknown flags and subcommands are
// usage errors (status 2) that show the subcommand's usage line.
func TestKVUsage(t *testing.T) {
	st := &fakeStore{m: map[string]string{}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"kv", "put", "k"}, "usage: tebis kv put [options] KEY VALUE"},
		{[]string{"kv", "put", "k", "v", "extra"}, "usage: tebis kv put [options] KEY VALUE"},
		{[]string{"kv", "get"}, "usage: tebis kv get [options] KEY"},
		{[]string{"kv", "delete", "a", "b"}, "usage: tebis kv delete [options] KEY"},
		{[]string{"kv", "scan", "x"}, "kv scan: want no arguments"},
		{[]string{"kv", "get", "--bogus", "k"}, "flag provided but not defined"},
		{[]string{"kv", "frob"}, `unknown subcommand "frob"`},
	} {
		out, errOut, status := runKV(t, st, tc.args...)
		if status != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want status 2 and %q", tc.args, status, out, errOut, tc.want)
		}
	}
	if len(st.m) != 0 {
		t.Fatalf("a usage error wrote: %v", st.m)
	}
	// Each subcommand that takes arguments documents them.
	for _, sub := range kvCommand().Subcommands {
		if sub.Name != "scan" && sub.ArgsUsage == "" {
			t.Errorf("kv %s has no ArgsUsage", sub.Name)
		}
		if !strings.Contains(sub.Description, "Exit status") {
			t.Errorf("kv %s's help does not document the exit status", sub.Name)
		}
	}
}
