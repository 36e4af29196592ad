package region

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/pki"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
)

// freeTCP returns a loopback address no one listens on (for a map that
// names it before its server starts).
func freeTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// tlsClient opens a client of the map file over tcp with files (none:
// plaintext) whose writes give up after a second.
func tlsClient(t *testing.T, mapFile string, files pki.Files) *client.Client {
	t.Helper()
	cl, err := client.Open(context.Background(), client.Config{Map: regionmap.File(mapFile), Transport: "tcp",
		TLSCert: files.Cert, TLSKey: files.Key, TLSCA: files.CA, RetryWindow: time.Second, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestTLSClientsAndReplication: two servers with TLS on tcp, primary p
// replicating region 1 to backup b over tcp. A client with a certificate
// the cluster's CA signed writes and reads; one with no certificate, or
// with one another CA signed, is refused and the servers serve the valid
// client after it; a client certificate cannot open a replication
// connection; the backup holds the acknowledged write (promoted, it
// serves it).
func TestTLSClientsAndReplication(t *testing.T) {
	dir := t.TempDir()
	certs, other := filepath.Join(dir, "certs"), filepath.Join(dir, "other")
	for _, d := range []string{certs, other} {
		if _, err := (pki.Dev{Dir: d, Hosts: []string{"127.0.0.1"}}).Generate(); err != nil {
			t.Fatal(err)
		}
	}
	addrs := map[string]string{"p": freeTCP(t), "b": freeTCP(t)}
	m := &regionmap.Map{Version: 1, Replication: "send-index",
		Servers: []regionmap.Server{{Name: "p", TCP: addrs["p"]}, {Name: "b", TCP: addrs["b"]}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Backups: []string{"b"}, Epoch: 1}}}
	server := pki.ServerFiles(certs, "127.0.0.1")
	start := staticServersWith(t, dir, m, 10*time.Second, nil, func(c *Config) {
		c.Shm, c.TCP, c.ReplicationTransport = "", addrs[c.Name], "tcp"
		c.TLSCert, c.TLSKey, c.TLSCA = server.Cert, server.Key, server.CA
	})
	b := start("b")
	p := start("p")
	deadline := time.Now().Add(10 * time.Second)
	for p.state.Load().attaching(1) {
		if time.Now().After(deadline) {
			t.Fatal("region 1 never attached to its backup over TLS")
		}
		time.Sleep(10 * time.Millisecond)
		_ = p.attachAll()
	}
	mapFile := filepath.Join(dir, "map.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	valid := tlsClient(t, mapFile, pki.ClientFiles(certs))
	if err := valid.Put(ctx, []byte("k1"), []byte("v1")); err != nil {
		t.Fatalf("put with a valid certificate: %v", err)
	}

	foreign := pki.ClientFiles(other)
	foreign.CA = server.CA // trusts the servers; signed by another CA
	for name, files := range map[string]pki.Files{"no certificate": {}, "another CA's certificate": foreign} {
		cl := tlsClient(t, mapFile, files)
		if err := cl.Put(ctx, []byte("k1"), []byte("intruder")); !errors.Is(err, client.ErrUnavailable) {
			t.Errorf("put with %s: %v, want ErrUnavailable", name, err)
		}
		if v, err := cl.Get(ctx, []byte("k1")); !errors.Is(err, client.ErrUnavailable) {
			t.Errorf("get with %s: %q, %v, want ErrUnavailable", name, v, err)
		}
	}

	// A client certificate does not make a primary: a replication
	// connection with one is rejected.
	clientTLS, err := pki.Load(pki.ClientFiles(certs))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ring.Dial(ctx, ring.ClientConfig{Transport: &rdma.TCP{TLS: clientTLS}, Addr: addrs["b"], PrivatePrefix: commandPrefix})
	if !errors.Is(err, rdma.ErrRejected) {
		if rc != nil {
			rc.Close()
		}
		t.Fatalf("replication command ring with a client certificate: %v, want ErrRejected", err)
	}

	fresh := tlsClient(t, mapFile, pki.ClientFiles(certs))
	if v, err := fresh.Get(ctx, []byte("k1")); err != nil || string(v) != "v1" {
		t.Fatalf("get with a valid certificate after the refused clients: %q, %v", v, err)
	}

	// The backup has the write: promoted, it serves it.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := m.Clone()
	m2.Version, m2.Regions[0].Primary, m2.Regions[0].Backups, m2.Regions[0].Epoch = 2, "b", nil, 2
	if err := regionmap.WriteFile(mapFile, m2); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if v, err := valid.Get(ctx, []byte("k1")); err != nil || string(v) != "v1" {
		t.Fatalf("get from the promoted backup: %q, %v, want v1", v, err)
	}
}

// fakeLocalReq is a connection request over shm from a process of uid.
type fakeLocalReq struct {
	uid      uint32
	private  []byte
	rejected bool
}

func (r *fakeLocalReq) Private() []byte              { return r.private }
func (r *fakeLocalReq) PeerRegions() []rdma.RemoteMR { return nil }
func (r *fakeLocalReq) Accept(rdma.ConnConfig) (rdma.QP, error) {
	return nil, errors.New("not accepted here")
}
func (r *fakeLocalReq) Reject() error   { r.rejected = true; return nil }
func (r *fakeLocalReq) PeerUID() uint32 { return r.uid }

// TestReplicationOnlyFromServerUID: over shm, a process whose uid may
// connect as a client (shm_allow_uids) is refused a replication
// connection, a primary's command ring as well as its log mirror: only
// the server's own user and root replicate.
func TestReplicationOnlyFromServerUID(t *testing.T) {
	s := &Server{}
	other := uint32(os.Getuid()) + 4242
	for _, pd := range [][]byte{append([]byte(nil), commandPrefix...), []byte("hello of a primary")} {
		req := &fakeLocalReq{uid: other, private: pd}
		if err := s.otherConn(req); !errors.Is(err, rdma.ErrAuth) || !req.rejected {
			t.Errorf("private %q from uid %d: %v (rejected %v), want ErrAuth", pd, other, err, req.rejected)
		}
	}
	for _, c := range []struct {
		uid  uint32
		want bool
	}{{uint32(os.Getuid()), true}, {0, true}, {other, false}} {
		if got := serverUID(c.uid, uint32(os.Getuid())); got != c.want {
			t.Errorf("serverUID(%d): %v, want %v", c.uid, got, c.want)
		}
	}
}

func TestMayReplicate(t *testing.T) {
	server := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	clientOnly := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	cases := []struct {
		name             string
		tlsOn, certified bool
		cert             *x509.Certificate
		want             bool
	}{
		{"plaintext server", false, true, nil, true},
		{"shm or loopback under TLS", true, false, nil, true},
		{"server certificate", true, true, server, true},
		{"client certificate", true, true, clientOnly, false},
		{"no certificate", true, true, nil, false},
	}
	for _, c := range cases {
		if got := mayReplicate(c.tlsOn, c.certified, c.cert); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
