package bench

import (
	"slices"
	"testing"

	"github.com/tebis-go/tebis/client/regionmap"
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
