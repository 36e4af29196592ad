package pki

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// devCerts generates a dev cluster's certificates for hosts in a new
// directory.
func devCerts(t *testing.T, hosts ...string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := (Dev{Dir: dir, Hosts: hosts}).Generate(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t *testing.T, f Files) *tls.Config {
	t.Helper()
	cfg, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// handshake runs a TLS server with srv and a client with cli dialing
// serverName over loopback, and returns both sides' handshake errors.
func handshake(t *testing.T, srv, cli *tls.Config, serverName string) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		tc := tls.Server(c, srv)
		err = tc.Handshake()
		if err == nil { // TLS 1.3: the client learns the verdict on its first read
			_, err = tc.Write([]byte{1})
		}
		done <- err
	}()
	cli = cli.Clone()
	cli.ServerName = serverName
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cli)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		_, err = c.Read(b[:])
		c.Close()
	}
	return <-done, err
}

func TestGenerateWritesLoadableFiles(t *testing.T) {
	dir := t.TempDir()
	written, err := (Dev{Dir: dir, Hosts: []string{"127.0.0.1", "node-a"}}).Generate()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ca.crt", "ca.key", "server-127.0.0.1.crt", "server-127.0.0.1.key", "server-node-a.crt", "server-node-a.key", "client.crt", "client.key"}
	if len(written) != len(want) {
		t.Fatalf("wrote %v, want %v", written, want)
	}
	for i, w := range want {
		if written[i] != filepath.Join(dir, w) {
			t.Fatalf("wrote %v, want %v", written, want)
		}
		st, err := os.Stat(written[i])
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(w, ".key") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", w, st.Mode().Perm())
		}
	}
	for _, f := range []Files{ServerFiles(dir, "127.0.0.1"), ServerFiles(dir, "node-a"), ClientFiles(dir)} {
		load(t, f)
	}
}

// TestGeneratedCertsHandshake: a client certificate and each server's
// (by the name or the IP it was made for) handshake; a server
// certificate serves as a client one too (replication between servers).
func TestGeneratedCertsHandshake(t *testing.T) {
	dir := devCerts(t, "127.0.0.1", "node-a")
	client := load(t, ClientFiles(dir))
	for _, host := range []string{"127.0.0.1", "node-a"} {
		srv := load(t, ServerFiles(dir, host))
		if serr, cerr := handshake(t, srv, client, host); serr != nil || cerr != nil {
			t.Fatalf("client to %s: server %v, client %v", host, serr, cerr)
		}
	}
	a, b := load(t, ServerFiles(dir, "node-a")), load(t, ServerFiles(dir, "127.0.0.1"))
	if serr, cerr := handshake(t, b, a, "127.0.0.1"); serr != nil || cerr != nil {
		t.Fatalf("server to server: server %v, client %v", serr, cerr)
	}
}

// TestHandshakeRefusals: a client certificate from another CA, no client
// certificate, a server name the certificate does not carry and a
// client certificate used as a server's are all refused.
func TestHandshakeRefusals(t *testing.T) {
	dir, other := devCerts(t, "127.0.0.1"), devCerts(t, "127.0.0.1")
	srv := load(t, ServerFiles(dir, "127.0.0.1"))
	client := load(t, ClientFiles(dir))
	foreign := ClientFiles(other)
	foreign.CA = filepath.Join(dir, CACert) // trusts the server, signed by another CA
	noCert := client.Clone()
	noCert.Certificates = nil
	cases := []struct {
		name     string
		srv, cli *tls.Config
		host     string
	}{
		{"client cert of another CA", srv, load(t, foreign), "127.0.0.1"},
		{"no client cert", srv, noCert, "127.0.0.1"},
		{"server of another CA", load(t, ServerFiles(other, "127.0.0.1")), client, "127.0.0.1"},
		{"wrong server name", srv, client, "node-b"},
		{"client cert as a server's", load(t, ClientFiles(dir)), client, "127.0.0.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			serr, cerr := handshake(t, c.srv, c.cli, c.host)
			if serr == nil || cerr == nil {
				t.Fatalf("handshake: server %v, client %v; want both to fail", serr, cerr)
			}
		})
	}
}

func TestGenerateRefusals(t *testing.T) {
	dir := devCerts(t, "h")
	if _, err := (Dev{Dir: dir, Hosts: []string{"h"}}).Generate(); !errors.Is(err, ErrCert) || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("generate over existing files: %v", err)
	}
	for _, hosts := range [][]string{nil, {""}, {"a/b"}, {".."}} {
		if _, err := (Dev{Dir: t.TempDir(), Hosts: hosts}).Generate(); !errors.Is(err, ErrCert) {
			t.Errorf("hosts %q: %v, want ErrCert", hosts, err)
		}
	}
}

func TestLoadRefusals(t *testing.T) {
	dir := devCerts(t, "h")
	good := ServerFiles(dir, "h")
	if cfg, err := Load(Files{}); cfg != nil || err != nil {
		t.Fatalf("no files: %v, %v; want plaintext (nil, nil)", cfg, err)
	}
	cases := map[string]Files{
		"no key":        {Cert: good.Cert, CA: good.CA},
		"no CA":         {Cert: good.Cert, Key: good.Key},
		"missing file":  {Cert: good.Cert, Key: good.Key, CA: filepath.Join(dir, "none")},
		"CA not PEM":    {Cert: good.Cert, Key: good.Key, CA: good.Key + "x"},
		"key of a cert": {Cert: good.Cert, Key: filepath.Join(dir, ClientKey), CA: good.CA},
	}
	if err := os.WriteFile(good.Key+"x", []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, f := range cases {
		if _, err := Load(f); !errors.Is(err, ErrCert) {
			t.Errorf("%s: %v, want ErrCert", name, err)
		}
	}
}
