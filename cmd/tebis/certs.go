package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/tebis-go/tebis/internal/pki"
	"github.com/urfave/cli/v2"
)

// tlsFlags are a client's certificate files (client.Config's TLS fields).
func tlsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM client certificate for tcp (with --tls-key and --tls-ca: mutual TLS)"},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM private key of --tls-cert"},
		&cli.StringFlag{Name: "tls-ca", Usage: "PEM CA certificate the servers' certificates must be signed by"},
	}
}

// clientTLS are the files tlsFlags name.
func clientTLS(c *cli.Context) pki.Files {
	return pki.Files{Cert: c.String("tls-cert"), Key: c.String("tls-key"), CA: c.String("tls-ca")}
}

func certsCommand() *cli.Command {
	return &cli.Command{
		Name:  "certs",
		Usage: "make a local CA, a server certificate per host and a client certificate, for a dev cluster's TLS",
		Description: "Writes ca.crt and ca.key, server-HOST.crt and server-HOST.key for each host (its one subject\n" +
			"alternative name the host: give the names or IPs in the region map's tcp addresses; also a client\n" +
			"certificate, for replication between servers) and client.crt and client.key, all signed by the CA.\n" +
			"Keys are written 0600; existing files are not overwritten. Keep ca.key away from the servers.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Required: true, Usage: "directory to write the files into (created if missing)"},
			&cli.StringFlag{Name: "hosts", Required: true, Usage: "comma-separated DNS names or IP addresses, one server certificate each"},
			&cli.DurationFlag{Name: "valid-for", Value: 365 * 24 * time.Hour, Usage: "how long the certificates are valid"},
		},
		Action: func(c *cli.Context) error {
			var hosts []string
			for h := range strings.SplitSeq(c.String("hosts"), ",") {
				if h = strings.TrimSpace(h); h != "" {
					hosts = append(hosts, h)
				}
			}
			written, err := pki.Dev{Dir: c.String("dir"), Hosts: hosts, Validity: c.Duration("valid-for")}.Generate()
			for _, p := range written {
				fmt.Fprintln(c.App.Writer, "wrote", p)
			}
			return err
		},
	}
}
