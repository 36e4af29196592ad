package region

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/zkserver"
)

// TestManagedServerCredential: a server given zk_auth_file registers
// with that identity (its znodes closed to others); one whose file is
// malformed does not start.
func TestManagedServerCredential(t *testing.T) {
	zs := zkserver.ForTest(t)
	dir := t.TempDir()
	authFile := filepath.Join(dir, "zk.auth")
	if err := os.WriteFile(authFile, []byte("tebis:pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm = "rs1", filepath.Join(dir, "rs1"), "", filepath.Join(dir, "rs1.sock")
	cfg.Zookeeper, cfg.ZKSessionTimeout, cfg.ZKAuthFile = zs.Addr(), Duration(time.Second), authFile
	cfg.SegmentSize, cfg.L0Pairs = 64<<10, 256
	s, err := Start(cfg, zaptest.NewLogger(t).Named("rs1"), WithFS(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	admin, err := coord.Dial(ctx(t), coord.Config{Servers: []string{zs.Addr()}, Root: cfg.ZKRoot, Auth: "tebis:pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	live, err := admin.Servers(ctx(t))
	if err != nil || live["rs1"].Name != "rs1" {
		t.Fatalf("registered servers %v, %v; want rs1", live, err)
	}
	acl, _, err := admin.Conn().GetACL(cfg.ZKRoot + "/servers/rs1")
	if err != nil || !slices.Equal(acl, zk.DigestACL(zk.PermAll, "tebis", "pw")) {
		t.Fatalf("acl of rs1's znode: %v, %v", acl, err)
	}
	open, err := coord.Dial(ctx(t), coord.Config{Servers: []string{zs.Addr()}, Root: cfg.ZKRoot})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Servers(ctx(t)); !errors.Is(err, coord.ErrAuth) {
		t.Fatalf("servers without the credential: %v, want %v", err, coord.ErrAuth)
	}

	if err := os.WriteFile(authFile, []byte("no-colon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.Name, bad.DataDir, bad.Shm = "rs2", filepath.Join(dir, "rs2"), filepath.Join(dir, "rs2.sock")
	if s2, err := Start(bad, zaptest.NewLogger(t).Named("rs2"), WithFS(vfs.NewMem())); !errors.Is(err, coord.ErrAuth) {
		if err == nil {
			s2.Close()
		}
		t.Fatalf("start with a malformed credential file: %v, want %v", err, coord.ErrAuth)
	}
}
