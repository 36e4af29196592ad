package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/urfave/cli/v2"
)

func kvCommand() *cli.Command {
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print results as JSON"}
	return &cli.Command{
		Name:  "kv",
		Usage: "put, get, delete and scan keys through the client",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "map", Usage: "region map file (YAML)"},
			&cli.StringFlag{Name: "zookeeper", Usage: "a managed cluster's ZooKeeper ensemble host:port[,...] (the master's map)"},
			&cli.StringFlag{Name: "zk-root", Value: "/tebis", Usage: "the cluster's znode"},
			&cli.StringFlag{Name: "server", Value: "127.0.0.1:7070", Usage: "without --map: one standalone server's address"},
			&cli.StringFlag{Name: "transport", Value: "tcp", Usage: "tcp or shm (with --server, the address is a socket path for shm)"},
		},
		Subcommands: []*cli.Command{
			{Name: "put", ArgsUsage: "KEY VALUE", Flags: []cli.Flag{jsonFlag}, Action: kvAction(2, func(c *cli.Context, cl *client.Client) (any, error) {
				return map[string]string{"key": c.Args().Get(0), "result": "ok"}, cl.Put(c.Context, []byte(c.Args().Get(0)), []byte(c.Args().Get(1)))
			})},
			{Name: "get", ArgsUsage: "KEY", Flags: []cli.Flag{jsonFlag}, Action: kvAction(1, func(c *cli.Context, cl *client.Client) (any, error) {
				v, err := cl.Get(c.Context, []byte(c.Args().Get(0)))
				return map[string]string{"key": c.Args().Get(0), "value": string(v)}, err
			})},
			{Name: "delete", ArgsUsage: "KEY", Flags: []cli.Flag{jsonFlag}, Action: kvAction(1, func(c *cli.Context, cl *client.Client) (any, error) {
				return map[string]string{"key": c.Args().Get(0), "result": "ok"}, cl.Delete(c.Context, []byte(c.Args().Get(0)))
			})},
			{Name: "scan", Usage: "list pairs in [--start, --end)", Flags: []cli.Flag{
				jsonFlag,
				&cli.StringFlag{Name: "start"},
				&cli.StringFlag{Name: "end", Usage: "exclusive; empty: to the end"},
				&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most this many pairs (0: all)"},
			}, Action: kvAction(0, func(c *cli.Context, cl *client.Client) (any, error) {
				var end []byte
				if c.String("end") != "" {
					end = []byte(c.String("end"))
				}
				it := cl.Scan(c.Context, []byte(c.String("start")), end, client.ScanOptions{})
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

// kvAction opens a client, runs fn, and prints its result (text or JSON).
func kvAction(nargs int, fn func(*cli.Context, *client.Client) (any, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() != nargs {
			return fmt.Errorf("want %d arguments, got %d", nargs, c.NArg())
		}
		var src regionmap.Source
		if zk := c.String("zookeeper"); zk != "" {
			z, err := client.DialZooKeeper(c.Context, zk, c.String("zk-root"), nil)
			if err != nil {
				return err
			}
			defer z.Close()
			src = z
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
		cl, err := client.Open(c.Context, client.Config{Map: src, Transport: c.String("transport")})
		if err != nil {
			return err
		}
		defer cl.Close()
		res, err := fn(c, cl)
		if c.Bool("json") {
			out := map[string]any{"result": res}
			if err != nil {
				out = map[string]any{"error": err.Error(), "not_found": errors.Is(err, client.ErrNotFound)}
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(out)
			return err
		}
		if err != nil {
			return err
		}
		switch r := res.(type) {
		case []map[string]string:
			for _, p := range r {
				fmt.Printf("%s\t%s\n", p["key"], p["value"])
			}
		case map[string]string:
			if v, ok := r["value"]; ok {
				fmt.Println(v)
			} else {
				fmt.Println(r["result"])
			}
		}
		return nil
	}
}
