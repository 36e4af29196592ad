package main

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tebis-go/tebis/region"
	"github.com/urfave/cli/v2"
)

// parseServerFlags runs serverConfig on `server args...`.
func parseServerFlags(t *testing.T, args ...string) (region.Config, error) {
	t.Helper()
	var cfg region.Config
	var cerr error
	app := &cli.App{Commands: []*cli.Command{{Name: "server", Flags: serverFlags(), Action: func(c *cli.Context) error {
		cfg, cerr = serverConfig(c)
		return nil
	}}}}
	if err := app.RunContext(context.Background(), append([]string{"tebis", "server"}, args...)); err != nil {
		t.Fatal(err)
	}
	return cfg, cerr
}

func TestServerSecurityFlags(t *testing.T) {
	cfg, err := parseServerFlags(t, "--tls-cert", "s.crt", "--tls-key", "s.key", "--tls-ca", "ca.crt", "--shm-allow-uids", "1001, 1002")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSCert != "s.crt" || cfg.TLSKey != "s.key" || cfg.TLSCA != "ca.crt" || !slices.Equal(cfg.ShmAllowUIDs, []uint32{1001, 1002}) {
		t.Fatalf("config %+v", cfg)
	}
	if _, err := parseServerFlags(t, "--tls-cert", "s.crt"); !errors.Is(err, region.ErrConfig) {
		t.Fatalf("a certificate without key and CA: %v, want ErrConfig", err)
	}
	if _, err := parseServerFlags(t, "--shm-allow-uids", "1001,bob"); err == nil {
		t.Fatal("--shm-allow-uids with a name accepted")
	}
}

// TestServerUnsafeLoneAckFlag: the benchmarks' hidden flag sets
// Config.UnsafeLoneAck, off by default.
func TestServerUnsafeLoneAckFlag(t *testing.T) {
	cfg, err := parseServerFlags(t)
	if err != nil || cfg.UnsafeLoneAck {
		t.Fatalf("default: UnsafeLoneAck %v, %v", cfg.UnsafeLoneAck, err)
	}
	if cfg, err = parseServerFlags(t, "--unsafe-lone-ack"); err != nil || !cfg.UnsafeLoneAck {
		t.Fatalf("--unsafe-lone-ack: UnsafeLoneAck %v, %v", cfg.UnsafeLoneAck, err)
	}
}
