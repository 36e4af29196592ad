package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/urfave/cli/v2"
)

// Exit status of `tebis kv` (main maps a command's error through
// exitStatus). Other commands exit 1 on any failure.
const (
	exitNotFound = 1 // kv get: no value under the key
	exitUsage    = 2 // wrong argument count, unknown flag or subcommand
	exitFailure  = 3 // anything else: no server, server error, bad map, ...
)

const kvDescription = `Exit status: 0 success; 1 key not found (get: nothing on stdout, the
message on stderr; with --json the error document is still printed);
2 usage error (wrong argument count, unknown flag or subcommand);
3 any other failure (no server reachable, server or storage error, bad map).`

// statusError is an error that makes main exit with status. It must not
// have an ExitCode method: urfave/cli would then call os.Exit itself.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// exitStatus is the process exit status for a command's error: 0 for
// nil, a statusError's status, else 1.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	return 1
}

// usageError is a usage error (exit status 2) for c naming its usage line.
func usageError(c *cli.Context, format string, args ...any) error {
	cmd := c.Command
	line := cmd.HelpName // "tebis kv get"
	if line == "" {
		line = "tebis " + cmd.Name
	}
	name := strings.TrimPrefix(line, "tebis ")
	if len(cmd.VisibleFlags()) > 0 {
		line += " [options]"
	}
	if cmd.ArgsUsage != "" {
		line += " " + cmd.ArgsUsage
	}
	msg := fmt.Sprintf(format, args...)
	return &statusError{exitUsage, fmt.Errorf("%s: %s\nusage: %s (see --help)", name, msg, line)}
}

// kvStore is what the kv subcommands need of a client (tests fake it).
type kvStore interface {
	Put(ctx context.Context, key, value []byte) error
	Get(ctx context.Context, key []byte) ([]byte, error)
	Delete(ctx context.Context, key []byte) error
	Scan(ctx context.Context, start, end []byte) kvIterator
	Close() error
}

type kvIterator interface {
	Next() bool
	Key() []byte
	Value() []byte
	Err() error
	Close() error
}

// clientStore adapts a *client.Client to kvStore; Close also closes its
// ZooKeeper session, if any.
type clientStore struct {
	*client.Client
	zk *client.ZooKeeper
}

func (s clientStore) Close() error {
	err := s.Client.Close()
	if s.zk != nil {
		s.zk.Close()
	}
	return err
}

func (s clientStore) Scan(ctx context.Context, start, end []byte) kvIterator {
	return s.Client.Scan(ctx, start, end, client.ScanOptions{})
}

// openKVStore opens the client the kv flags describe; tests replace it.
var openKVStore = func(c *cli.Context) (kvStore, error) {
	var src regionmap.Source
	var zkSession *client.ZooKeeper
	if zk := c.String("zookeeper"); zk != "" {
		auth, err := zkAuth(c)
		if err != nil {
			return nil, err
		}
		z, err := client.DialZooKeeper(c.Context, zk, c.String("zk-root"), nil, client.ZooKeeperAuth(auth))
		if err != nil {
			return nil, err
		}
		src, zkSession = z, z
	} else if path := c.String("map"); path != "" {
		src = regionmap.File(path)
	} else {
		srv := regionmap.Server{Name: "rs1"}
		if c.String("transport") == "shm" {
			srv.Shm = c.String("server")
		} else {
			srv.TCP = c.String("server")
		}
		src = regionmap.Static{M: regionmap.Single(srv)}
	}
	cl, err := client.Open(c.Context, client.Config{Map: src, Transport: c.String("transport"),
		TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"), TLSCA: c.String("tls-ca")})
	if err != nil {
		if zkSession != nil {
			zkSession.Close()
		}
		return nil, err
	}
	return clientStore{cl, zkSession}, nil
}

func kvCommand() *cli.Command {
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print results as JSON"}
	onUsage := func(c *cli.Context, err error, _ bool) error { return usageError(c, "%v", err) }
	return &cli.Command{
		Name:         "kv",
		Usage:        "put, get, delete and scan keys through the client",
		ArgsUsage:    "put|get|delete|scan ...",
		Description:  kvDescription,
		OnUsageError: onUsage,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "map", Usage: "region map file (YAML)"},
			&cli.StringFlag{Name: "zookeeper", Usage: "a managed cluster's ZooKeeper ensemble host:port[,...] (the master's map)"},
			&cli.StringFlag{Name: "zk-root", Value: "/tebis", Usage: "the cluster's znode"},
			&cli.StringFlag{Name: "zk-auth-file", Usage: zkAuthFileUsage},
			&cli.StringFlag{Name: "server", Value: "127.0.0.1:7070", Usage: "without --map: one standalone server's address"},
			&cli.StringFlag{Name: "transport", Value: "tcp", Usage: "tcp or shm (with --server, the address is a socket path for shm)"},
		}, tlsFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError(c, "unknown subcommand %q", c.Args().First())
			}
			return cli.ShowSubcommandHelp(c)
		},
		Subcommands: []*cli.Command{
			{Name: "put", Usage: "store VALUE under KEY", ArgsUsage: "KEY VALUE", Description: kvDescription, OnUsageError: onUsage, Flags: []cli.Flag{jsonFlag}, Action: kvAction(2, func(c *cli.Context, st kvStore) (any, error) {
				return map[string]string{"key": c.Args().Get(0), "result": "ok"}, st.Put(c.Context, []byte(c.Args().Get(0)), []byte(c.Args().Get(1)))
			})},
			{Name: "get", Usage: "print the value under KEY (exit status 1 if there is none)", ArgsUsage: "KEY", Description: kvDescription, OnUsageError: onUsage, Flags: []cli.Flag{jsonFlag}, Action: kvAction(1, func(c *cli.Context, st kvStore) (any, error) {
				v, err := st.Get(c.Context, []byte(c.Args().Get(0)))
				return map[string]string{"key": c.Args().Get(0), "value": string(v)}, err
			})},
			{Name: "delete", Usage: "delete KEY", ArgsUsage: "KEY", Description: kvDescription, OnUsageError: onUsage, Flags: []cli.Flag{jsonFlag}, Action: kvAction(1, func(c *cli.Context, st kvStore) (any, error) {
				return map[string]string{"key": c.Args().Get(0), "result": "ok"}, st.Delete(c.Context, []byte(c.Args().Get(0)))
			})},
			{Name: "scan", Usage: "list pairs in [--start, --end) (no arguments)", Description: kvDescription, OnUsageError: onUsage, Flags: []cli.Flag{
				jsonFlag,
				&cli.StringFlag{Name: "start"},
				&cli.StringFlag{Name: "end", Usage: "exclusive; empty: to the end"},
				&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most this many pairs (0: all)"},
			}, Action: kvAction(0, func(c *cli.Context, st kvStore) (any, error) {
				var end []byte
				if c.String("end") != "" {
					end = []byte(c.String("end"))
				}
				it := st.Scan(c.Context, []byte(c.String("start")), end)
				defer it.Close()
				var out []map[string]string
				for it.Next() && (c.Int("limit") == 0 || len(out) < c.Int("limit")) {
					out = append(out, map[string]string{"key": string(it.Key()), "value": string(it.Value())})
				}
				return out, it.Err()
			})},
		},
	}
}

// kvAction checks the argument count, opens a client, runs fn, and prints
// its result (text or JSON) on the app's writer. Its error carries the
// exit status (see kvDescription).
func kvAction(nargs int, fn func(*cli.Context, kvStore) (any, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() != nargs {
			want := "no arguments"
			if nargs > 0 {
				want = fmt.Sprintf("%d argument%s (%s)", nargs, map[bool]string{true: "s"}[nargs > 1], c.Command.ArgsUsage)
			}
			got := "none"
			if c.NArg() > 0 {
				got = fmt.Sprintf("%d (%s)", c.NArg(), strings.Join(c.Args().Slice(), " "))
			}
			return usageError(c, "want %s, got %s", want, got)
		}
		st, err := openKVStore(c)
		if err != nil {
			return &statusError{exitFailure, err}
		}
		defer st.Close()
		res, err := fn(c, st)
		w := c.App.Writer
		if c.Bool("json") {
			out := map[string]any{"result": res}
			if err != nil {
				out = map[string]any{"error": err.Error(), "not_found": errors.Is(err, client.ErrNotFound)}
			}
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(out)
		}
		switch {
		case errors.Is(err, client.ErrNotFound):
			return &statusError{exitNotFound, fmt.Errorf("key %q not found", c.Args().Get(0))}
		case err != nil:
			return &statusError{exitFailure, err}
		case c.Bool("json"):
			return nil
		}
		switch r := res.(type) {
		case []map[string]string:
			for _, p := range r {
				fmt.Fprintf(w, "%s\t%s\n", p["key"], p["value"])
			}
		case map[string]string:
			if v, ok := r["value"]; ok {
				fmt.Fprintln(w, v)
			} else {
				fmt.Fprintln(w, r["result"])
			}
		}
		return nil
	}
}
