package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/metrics"
	"github.com/tebis-go/tebis/master"
)

func zkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "zookeeper", Value: "127.0.0.1:2181", Usage: "ZooKeeper ensemble host:port[,host:port]"},
		&cli.StringFlag{Name: "zk-root", Value: "/tebis", Usage: "the cluster's znode"},
		&cli.DurationFlag{Name: "zk-session-timeout", Value: 2 * time.Second, Usage: "ZooKeeper session timeout"},
		&cli.StringFlag{Name: "zk-auth-file", Usage: zkAuthFileUsage},
	}
}

const zkAuthFileUsage = "file holding the cluster's ZooKeeper credential, user:password (empty: none); the znodes created are then that identity's only (docs/operations.md)"

// zkAuth is the credential --zk-auth-file names ("" without the flag).
func zkAuth(c *cli.Context) (string, error) {
	if p := c.String("zk-auth-file"); p != "" {
		return coord.ReadAuthFile(p)
	}
	return "", nil
}

func dialZK(c *cli.Context, log *zap.Logger) (*coord.Session, error) {
	auth, err := zkAuth(c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	return coord.Dial(ctx, coord.Config{Servers: []string{c.String("zookeeper")}, Root: c.String("zk-root"),
		SessionTimeout: c.Duration("zk-session-timeout"), Log: log.Named("zk"), Auth: auth})
}

func masterCommand() *cli.Command {
	return &cli.Command{
		Name:  "master",
		Usage: "run a master: campaigns in ZooKeeper; the leader keeps the region map and fails servers over (docs/failover.md)",
		Flags: append(zkFlags(),
			&cli.StringFlag{Name: "name", Value: hostName(), Usage: "this master's name"},
			&cli.DurationFlag{Name: "grace", Value: 10 * time.Second, Usage: "a new leader's wait for servers of the map it never saw live"},
			&cli.DurationFlag{Name: "log-wait", Value: time.Second, Usage: "how long a failed primary's promotion waits for every live backup's log position before choosing among the complete copies reported"},
			&cli.DurationFlag{Name: "drop-hold", Value: 5 * time.Second, Usage: "how long a server dropped from a replication stream gets no new backup role (unless it registers again)"},
			&cli.BoolFlag{Name: "balance", Value: true, Usage: "spread the regions' primaries evenly over the servers (a moved primary stays in its group as a backup)"},
			&cli.DurationFlag{Name: "move-timeout", Value: 10 * time.Second, Usage: "how long a move of a live primary waits for it to release its region before it is cancelled"},
			&cli.StringFlag{Name: "http", Usage: "host:port of the /healthz, /readyz and status page endpoints (empty: off; they need no credentials: keep them on loopback, e.g. 127.0.0.1:9090, or a private network)"},
		),
		Action: func(c *cli.Context) error {
			log, err := newLogger(c)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			sess, err := dialZK(c, log)
			if err != nil {
				return err
			}
			defer sess.Close()
			reg := metrics.NewRegistry() // served at /metrics with --http
			return master.Run(c.Context, master.Config{Name: c.String("name"), Session: sess, Grace: c.Duration("grace"),
				LogWait: c.Duration("log-wait"), DropHold: c.Duration("drop-hold"), Balance: c.Bool("balance"), MoveTimeout: c.Duration("move-timeout"),
				HTTP: c.String("http"), Metrics: reg, Handlers: map[string]http.Handler{"GET /metrics": metrics.Handler(reg)}, Log: log.Named("master")})
		},
	}
}

func hostName() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "a managed cluster's region map in ZooKeeper",
		Subcommands: append([]*cli.Command{{
			Name:  "init",
			Usage: "create the region map over the registered servers (waits for --servers of them)",
			Flags: append(zkFlags(),
				&cli.IntFlag{Name: "servers", Value: 3, Usage: "registered region servers to wait for"},
				&cli.DurationFlag{Name: "wait", Value: time.Minute, Usage: "how long to wait for them"},
				&cli.IntFlag{Name: "regions", Value: 3, Usage: "regions, split evenly over --prefix + decimal digits"},
				&cli.StringFlag{Name: "prefix", Value: "user", Usage: "common key prefix of the even split (YCSB: user)"},
				&cli.StringFlag{Name: "splits", Usage: "comma-separated keys where regions start (instead of --regions)"},
				&cli.IntFlag{Name: "replicas", Value: 3, Usage: "copies of each region, primary included"},
				&cli.StringFlag{Name: "replication", Value: "send-index", Usage: "send-index or build-index"},
				&cli.IntFlag{Name: "min-copies", Value: 1, Usage: "copies, primary included, that hold a write before it is acknowledged (1 to --replicas); a region with fewer refuses writes"},
			),
			Action: withSession(clusterInit),
		}, {
			Name:   "status",
			Usage:  "print the leading master, the live servers and the region map",
			Flags:  append(zkFlags(), &cli.BoolFlag{Name: "json", Usage: "JSON output"}),
			Action: withSession(clusterStatus),
		}, {
			Name:   "set-acl",
			Usage:  "give the root and every znode under it the ACL of --zk-auth-file's identity (closing a cluster created without one; stop every member first)",
			Flags:  zkFlags(),
			Action: withSession(clusterSetACL),
		}, {
			Name:        "health",
			Usage:       "check /healthz and /readyz of every region server and master registered in ZooKeeper",
			Description: healthDescription,
			Flags:       append(zkFlags(), &cli.DurationFlag{Name: "timeout", Value: 2 * time.Second, Usage: "bound of each HTTP request"}),
			Action:      clusterHealth,
		}}, adminCommands()...),
	}
}

// withSession runs fn with a ZooKeeper session from the command's flags.
func withSession(fn func(*cli.Context, *coord.Session) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		log, err := newLogger(c)
		if err != nil {
			return err
		}
		sess, err := dialZK(c, log)
		if err != nil {
			return err
		}
		defer sess.Close()
		return fn(c, sess)
	}
}

func clusterInit(c *cli.Context, sess *coord.Session) error {
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("wait"))
	defer cancel()
	var live map[string]coord.ServerInfo
	var err error
	for {
		if live, err = sess.Servers(ctx); err != nil {
			return err
		}
		if len(live) >= c.Int("servers") {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d region servers registered after %v", len(live), c.Int("servers"), c.Duration("wait"))
		case <-time.After(200 * time.Millisecond):
		}
	}
	var srvs []regionmap.Server
	for _, si := range live {
		srv := si.Server
		srv.Started = si.Started
		srvs = append(srvs, srv)
	}
	l := master.Layout{Regions: c.Int("regions"), Prefix: c.String("prefix"), Replicas: c.Int("replicas"), Replication: c.String("replication"), MinCopies: c.Int("min-copies")}
	if c.Int("min-copies") < 1 {
		return fmt.Errorf("--min-copies %d: want 1 to --replicas", c.Int("min-copies"))
	}
	if s := c.String("splits"); s != "" {
		l.Splits = strings.Split(s, ",")
	}
	m, err := master.InitialMap(srvs, l)
	if err != nil {
		return err
	}
	if err := sess.CreateMap(ctx, m); err != nil {
		return err
	}
	fmt.Printf("region map created: %d regions, %d replicas, min copies %d, servers %s\n", len(m.Regions), m.Replicas, m.Copies(), names(m.Servers))
	return nil
}

func clusterSetACL(c *cli.Context, sess *coord.Session) error {
	if c.String("zk-auth-file") == "" {
		return fmt.Errorf("set-acl needs --zk-auth-file: the credential whose identity gets the znodes")
	}
	n, err := sess.SetTreeACL(c.Context)
	if err != nil {
		return err
	}
	fmt.Printf("ACL set on %d znodes under %s\n", n, sess.Root())
	return nil
}

func names(ss []regionmap.Server) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

func clusterStatus(c *cli.Context, sess *coord.Session) error {
	leader, err := sess.Leader(c.Context)
	if err != nil {
		return err
	}
	live, err := sess.Servers(c.Context)
	if err != nil {
		return err
	}
	m, _, err := sess.ReadMap(c.Context)
	if err != nil {
		return err
	}
	health, err := sess.HealthReports(c.Context)
	if err != nil {
		return err
	}
	rq, err := sess.Requests(c.Context)
	if err != nil {
		return err
	}
	var lv []string
	for n := range live {
		lv = append(lv, n)
	}
	sort.Strings(lv)
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"master": leader, "live": lv, "map": m, "unhealthy": health,
			"drained": slices.Sorted(maps.Keys(rq.Drained)), "moves_requested": rq.Moves, "rebalance_requested": rq.Rebalance})
	}
	fmt.Fprintf(c.App.Writer, "master: %s\nlive servers: %s\nmap version %d, %d replicas, %s\n", leader, strings.Join(lv, ","), m.Version, m.Replicas, m.Replication)
	for _, n := range slices.Sorted(maps.Keys(health)) {
		h := health[n]
		fmt.Fprintf(c.App.Writer, "  server %s cannot store writes (%s since %s): %s\n", n, h.State, time.Unix(0, h.Since).UTC().Format(time.RFC3339), h.Error)
	}
	if len(rq.Drained) > 0 {
		fmt.Fprintf(c.App.Writer, "  drained: %s\n", strings.Join(slices.Sorted(maps.Keys(rq.Drained)), ","))
	}
	for _, r := range m.Regions {
		moving := ""
		if r.MoveTo != "" {
			moving = " moving to " + r.MoveTo
		}
		fmt.Fprintf(c.App.Writer, "  region %d [%q, %q) epoch %d: primary %s%s backups %v joining %v\n", r.ID, r.Start, r.End, r.Epoch, r.Primary, moving, r.Backups, r.Joining)
	}
	return nil
}
