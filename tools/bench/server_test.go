package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/proctest"
)

// TestServerArgsAsyncAcksFromMemory: the server the bench starts
// acknowledges async writes from memory, as the in-process engine does
// (--unsafe-lone-ack), and never in sync mode.
func TestServerArgsAsyncAcksFromMemory(t *testing.T) {
	srv := regionmap.Server{Name: "rs1", Shm: "s.sock", TCP: "127.0.0.1:1"}
	for _, sync := range []bool{false, true} {
		args := serverArgs(TargetOptions{ServerArgv: []string{"tebis", "server"}, Sync: sync}, "d", srv)
		if got := slices.Contains(args, "--unsafe-lone-ack"); got == sync {
			t.Errorf("sync %v: --unsafe-lone-ack %v in %q", sync, got, args)
		}
		if i := slices.Index(args, "--sync-mode"); i < 0 || i+1 == len(args) || (args[i+1] == "sync") != sync {
			t.Errorf("sync %v: %q", sync, args)
		}
		if args[0] != "server" {
			t.Errorf("the server command lost: %q", args)
		}
	}
}

// TestServerEnv: the server the bench starts gets GOMAXPROCS of its own
// only when ServerProcs asks for it, replacing any this process has.
func TestServerEnv(t *testing.T) {
	env := []string{"HOME=/h", "GOMAXPROCS=8", "PATH=/bin"}
	if got := serverEnv(TargetOptions{}, env); got != nil {
		t.Fatalf("ServerProcs 0: env %q, want nil (inherited)", got)
	}
	got := serverEnv(TargetOptions{ServerProcs: 1}, env)
	want := []string{"HOME=/h", "PATH=/bin", "GOMAXPROCS=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("ServerProcs 1: env %q, want %q", got, want)
	}
	if !slices.Equal(env, []string{"HOME=/h", "GOMAXPROCS=8", "PATH=/bin"}) {
		t.Fatalf("the given env changed: %q", env)
	}
}

// TestServerProcs: with ServerProcs and ClientProcs the server runs with
// that GOMAXPROCS and this process with its own from open to Close; a
// failed open gives this process its GOMAXPROCS back too.
func TestServerProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	want := before + 1 // differs from the default whatever the machine
	bin := proctest.Binary(t)
	o := TargetOptions{Dir: t.TempDir(), Sync: true, ServerArgv: []string{bin, "--log-level", "warn", "server"},
		ServerProcs: want + 1, ClientProcs: want}
	tg, err := openServer(o)
	if err != nil {
		t.Fatal(err)
	}
	st := tg.(*serverTarget)
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Errorf("this process's GOMAXPROCS while the server engine runs: %d, want %d", got, want)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", st.proc.PID()))
	if err != nil {
		t.Fatal(err)
	}
	procs := slices.DeleteFunc(strings.Split(string(environ), "\x00"), func(kv string) bool { return !strings.HasPrefix(kv, "GOMAXPROCS=") })
	if !slices.Equal(procs, []string{fmt.Sprintf("GOMAXPROCS=%d", want+1)}) {
		t.Errorf("server environment: %q, want GOMAXPROCS=%d alone", procs, want+1)
	}
	if err := tg.Close(); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("after Close: GOMAXPROCS %d, want %d back", got, before)
	}
	o.ServerArgv = []string{filepath.Join(t.TempDir(), "no-such-binary"), "server"}
	if _, err := openServer(o); err == nil {
		t.Fatal("a server that cannot start: open succeeded")
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("after a failed open: GOMAXPROCS %d, want %d back", got, before)
	}
}
