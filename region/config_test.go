package region

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"2MiB": 2 << 20, "64 KiB": 64 << 10, "1GB": 1e9, "512B": 512, "1.5KiB": 1536} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"12", "MiB", "-1KiB", "2 parsecs"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
	if s := ByteSize(2 << 20).String(); s != "2MiB" {
		t.Errorf("String: %s", s)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := LoadConfig(write("name: rs7\ndata_dir: /srv/tebis\nsegment_size: 4MiB\nspin_time: 20us\ncache_size: 1GiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "rs7" || cfg.SegmentSize != 4<<20 || time.Duration(cfg.SpinTime) != 20*time.Microsecond || cfg.CacheSize != 1<<30 || cfg.Workers != DefaultConfig().Workers {
		t.Fatalf("config %+v", cfg)
	}
	if _, err := LoadConfig(write("")); err != nil {
		t.Fatalf("empty file (all defaults): %v", err)
	}
	for _, bad := range []string{
		"segment_size: 2000000\n",           // no unit
		"segment_size: 3MiB\n",              // not a power of two
		"sync_mode: sometimes\n",            // unknown mode
		"spin_time: 5\n",                    // no unit
		"colour: blue\n",                    // unknown key
		"shm: \"\"\ntcp: \"\"\n",            // listens nowhere
		"max_value_size: 2GiB\n",            // over the engine's limit
		"tls_cert: s.crt\ntls_key: s.key\n", // no CA
		"tls_ca: ca.crt\n",                  // a CA alone
		"shm_allow_uids: [-1]\n",            // not a uid
		"zk_auth_file: zk.auth\n",           // a credential without zookeeper
	} {
		if _, err := LoadConfig(write(bad)); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v, want ErrConfig", bad, err)
		}
	}
}

func TestLoadConfigSecurityKeys(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	body := "tls_cert: s.crt\ntls_key: s.key\ntls_ca: ca.crt\nshm_allow_uids: [1001, 1002]\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSCert != "s.crt" || cfg.TLSKey != "s.key" || cfg.TLSCA != "ca.crt" || !slices.Equal(cfg.ShmAllowUIDs, []uint32{1001, 1002}) {
		t.Fatalf("config %+v", cfg)
	}
}

func TestPlaintextExposed(t *testing.T) {
	cases := map[string]bool{
		"127.0.0.1:7070": false,
		"127.0.0.2:7070": false,
		"[::1]:7070":     false,
		"localhost:7070": false,
		":7070":          true,
		"0.0.0.0:7070":   true,
		"[::]:7070":      true,
		"10.0.0.5:7070":  true,
		"node-a:7070":    true,
		"garbage":        true,
	}
	for addr, want := range cases {
		if got := plaintextExposed(addr); got != want {
			t.Errorf("plaintextExposed(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestShmPeerUIDs(t *testing.T) {
	cases := []struct {
		allow []uint32
		self  uint32
		want  []uint32
	}{
		{nil, 1000, []uint32{0, 1000}},
		{nil, 0, []uint32{0}},
		{[]uint32{1002, 1001, 1000}, 1000, []uint32{0, 1000, 1001, 1002}},
	}
	for _, c := range cases {
		cfg := Config{ShmAllowUIDs: c.allow}
		if got := cfg.shmPeerUIDs(c.self); !slices.Equal(got, c.want) {
			t.Errorf("shm_allow_uids %v, self %d: %v, want %v", c.allow, c.self, got, c.want)
		}
	}
}
