package region

import (
	"errors"
	"os"
	"path/filepath"
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
		"segment_size: 2000000\n", // no unit
		"segment_size: 3MiB\n",    // not a power of two
		"sync_mode: sometimes\n",  // unknown mode
		"spin_time: 5\n",          // no unit
		"colour: blue\n",          // unknown key
		"shm: \"\"\ntcp: \"\"\n",  // listens nowhere
		"max_value_size: 2GiB\n",  // over the engine's limit
	} {
		if _, err := LoadConfig(write(bad)); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v, want ErrConfig", bad, err)
		}
	}
}
