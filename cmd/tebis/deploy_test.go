package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tebis-go/tebis/region"
)

// deployDir is the repository's deploy/ directory (docs/deploy.md).
const deployDir = "../../deploy"

// parseArgs parses args as `tebis` global flags, then command name's
// flags, then its arguments (as the binary would), and returns what is
// left after the flags.
func parseArgs(t *testing.T, args []string) []string {
	t.Helper()
	app := newApp()
	global := flag.NewFlagSet("tebis", flag.ContinueOnError)
	for _, f := range app.Flags {
		if err := f.Apply(global); err != nil {
			t.Fatal(err)
		}
	}
	if err := global.Parse(args); err != nil {
		t.Fatalf("global flags of %q: %v", args, err)
	}
	rest := global.Args()
	if len(rest) == 0 {
		t.Fatalf("%q names no command", args)
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.Name == rest[0] {
			cmd = c
		}
	}
	if cmd == nil {
		t.Fatalf("%q: no command %q", args, rest[0])
	}
	set := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	for _, f := range cmd.Flags {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse(rest[1:]); err != nil {
		t.Fatalf("%s flags of %q: %v", cmd.Name, args, err)
	}
	return set.Args()
}

// TestDeployFiles keeps deploy/ (docs/deploy.md) true: every host's
// server configuration loads, names its host's server, and lists the
// ZooKeeper ensemble of zoo.cfg; every master's flags and the units'
// command lines parse as the binary parses them.
func TestDeployFiles(t *testing.T) {
	zoo, err := os.ReadFile(filepath.Join(deployDir, "zoo.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	var ensemble []string
	for _, m := range regexp.MustCompile(`(?m)^server\.\d+=([^:]+):2888:3888$`).FindAllStringSubmatch(string(zoo), -1) {
		ensemble = append(ensemble, m[1]+":2181")
	}
	if len(ensemble) != 3 {
		t.Fatalf("zoo.cfg lists %d servers, want 3", len(ensemble))
	}
	hosts, err := filepath.Glob(filepath.Join(deployDir, "hosts", "*"))
	if err != nil || len(hosts) != 3 {
		t.Fatalf("hosts %v, %v", hosts, err)
	}
	var names, addrs []string
	for i, h := range hosts {
		cfg, err := region.LoadConfig(filepath.Join(h, "server.yaml"))
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		if want := fmt.Sprintf("rs%d", i+1); cfg.Name != want || !strings.HasSuffix(h, fmt.Sprint(i+1)) {
			t.Errorf("%s: server %s, want %s", h, cfg.Name, want)
		}
		if cfg.Zookeeper != strings.Join(ensemble, ",") {
			t.Errorf("%s: zookeeper %q, want zoo.cfg's ensemble %q", h, cfg.Zookeeper, strings.Join(ensemble, ","))
		}
		if cfg.TLSCert == "" || cfg.ZKAuthFile == "" || cfg.HTTP == "" {
			t.Errorf("%s: TLS, the ZooKeeper credential and HTTP must be set", h)
		}
		if cfg.Shm != "" && cfg.ReplicationTransport != "tcp" {
			// Else a primary would dial its backups' unix sockets on its
			// own host.
			t.Errorf("%s: servers on separate hosts with shm sockets need replication_transport: tcp", h)
		}
		names, addrs = append(names, cfg.Name), append(addrs, cfg.TCP)
		env, err := os.ReadFile(filepath.Join(h, "master.env"))
		if err != nil {
			t.Fatal(err)
		}
		line := regexp.MustCompile(`(?m)^TEBIS_MASTER_ARGS=(.*)$`).FindStringSubmatch(string(env))
		if line == nil {
			t.Fatalf("%s: master.env sets no TEBIS_MASTER_ARGS", h)
		}
		args := strings.Fields(line[1])
		if rest := parseArgs(t, append([]string{"master"}, args...)); len(rest) != 0 {
			t.Errorf("%s: master arguments left over: %q", h, rest)
		}
		if !slices.Contains(args, strings.Join(ensemble, ",")) {
			t.Errorf("%s: the master's --zookeeper is not zoo.cfg's ensemble", h)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(addrs)))) != 3 || len(slices.Compact(slices.Sorted(slices.Values(names)))) != 3 {
		t.Errorf("servers %v at %v: want three distinct", names, addrs)
	}
	for _, unit := range []string{"tebis-server.service", "tebis-master.service"} {
		b, err := os.ReadFile(filepath.Join(deployDir, unit))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/tebis (.*)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("%s: no ExecStart of /usr/local/bin/tebis", unit)
		}
		args := strings.Fields(strings.ReplaceAll(m[1], "$TEBIS_MASTER_ARGS", ""))
		if rest := parseArgs(t, args); len(rest) != 0 {
			t.Errorf("%s: arguments left over: %q", unit, rest)
		}
	}
}
