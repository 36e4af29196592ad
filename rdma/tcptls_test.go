package rdma_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/pki"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/internal/conformance"
)

// devTLS makes a dev CA in a new directory and returns the TLS
// configurations of a server for 127.0.0.1 and of a client.
func devTLS(t *testing.T) (server, client *tls.Config, dir string) {
	t.Helper()
	dir = t.TempDir()
	if _, err := (pki.Dev{Dir: dir, Hosts: []string{"127.0.0.1"}}).Generate(); err != nil {
		t.Fatal(err)
	}
	var err error
	if server, err = pki.Load(pki.ServerFiles(dir, "127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if client, err = pki.Load(pki.ClientFiles(dir)); err != nil {
		t.Fatal(err)
	}
	return server, client, dir
}

// TestTCPTLSConformance: the transport's contract holds over TLS (the
// server certificate serves both ends, as between region servers). The
// dead-peer timeout leaves room for encryption under the race detector.
func TestTCPTLSConformance(t *testing.T) {
	server, _, _ := devTLS(t)
	conformance.Run(t, conformance.Env{
		Transport:       &rdma.TCP{DeadAfter: time.Second, TLS: server},
		Addr:            func(*testing.T) string { return net.JoinHostPort("127.0.0.1", "0") },
		DeadWithin:      time.Second,
		ViewHoldsWrites: true,
	})
}

// TestTCPTLSRefusesUnauthenticated: a dialer without TLS, with no client
// certificate or with one another CA signed never reaches Accept (its
// connection request, with the regions it exposes, is never read) and
// its dial fails, ErrAuth for the TLS ones; a client with a valid
// certificate connects after them and WRITEs into the listener's region.
// OnRefused hears of each refusal.
func TestTCPTLSRefusesUnauthenticated(t *testing.T) {
	server, client, _ := devTLS(t)
	_, otherClient, _ := devTLS(t)
	foreign := otherClient.Clone() // signed by another CA, trusts ours
	foreign.RootCAs = client.RootCAs
	noCert := client.Clone()
	noCert.Certificates = nil

	refused := make(chan error, 8)
	ln, err := (&rdma.TCP{TLS: server, OnRefused: func(err error) { refused <- err }}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	target, err := rdma.Register(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Deregister()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name string
		tr   *rdma.TCP
		auth bool // fails with ErrAuth
	}{
		{"plaintext", &rdma.TCP{}, false},
		{"no client certificate", &rdma.TCP{TLS: noCert}, true},
		{"certificate of another CA", &rdma.TCP{TLS: foreign}, true},
	} {
		mr, err := rdma.Register(4096)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := c.tr.Dial(ctx, ln.Addr(), rdma.ConnConfig{CQ: rdma.NewCQ(), Expose: []*rdma.MR{mr}, Private: []byte("hello")})
		if err == nil {
			qp.Close()
			t.Fatalf("%s: dial succeeded", c.name)
		}
		if c.auth && !errors.Is(err, rdma.ErrAuth) {
			t.Errorf("%s: dial failed with %v, want ErrAuth", c.name, err)
		}
		actx, acancel := context.WithTimeout(ctx, 200*time.Millisecond)
		req, err := ln.Accept(actx)
		acancel()
		if err == nil {
			req.Reject()
			t.Fatalf("%s: its connection request reached Accept (private %q, regions %v)", c.name, req.Private(), req.PeerRegions())
		}
		mr.Deregister()
		select {
		case err := <-refused:
			if !errors.Is(err, rdma.ErrAuth) {
				t.Errorf("%s: refused with %v, want ErrAuth", c.name, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s: OnRefused not called", c.name)
		}
	}

	// The listener still serves a valid client, and names its certificate.
	accepted := make(chan rdma.QP, 1)
	peer := make(chan string, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			accepted <- nil
			return
		}
		if cert := req.(rdma.Certified).PeerCertificate(); cert != nil {
			peer <- cert.Subject.CommonName
		} else {
			peer <- "no certificate"
		}
		qp, err := req.Accept(rdma.ConnConfig{CQ: rdma.NewCQ(), Expose: []*rdma.MR{target}})
		if err != nil {
			qp = nil
		}
		accepted <- qp
	}()
	src, err := rdma.Register(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Deregister()
	cq := rdma.NewCQ()
	qp, err := (&rdma.TCP{TLS: client}).Dial(ctx, ln.Addr(), rdma.ConnConfig{CQ: cq})
	if err != nil {
		t.Fatalf("valid client: %v", err)
	}
	defer qp.Close()
	sqp := <-accepted
	if sqp == nil {
		t.Fatal("the listener did not accept the valid client")
	}
	defer sqp.Close()
	if name := <-peer; name != "tebis client" {
		t.Fatalf("the accepted request's peer certificate: %s, want the client's", name)
	}
	n := copy(src.Bytes(), "authenticated write..")
	if err := qp.PostWrite(rdma.WriteWR{ID: 1, Local: src, Len: n, Remote: qp.PeerRegions()[0], Signaled: true}); err != nil {
		t.Fatal(err)
	}
	var comp [1]rdma.Completion
	if _, err := cq.Wait(ctx, comp[:]); err != nil || comp[0].Err != nil {
		t.Fatalf("write completion: %v %v", err, comp[0].Err)
	}
	if got := string(target.Bytes()[:n]); got != "authenticated write.." {
		t.Fatalf("the listener's region holds %q", got)
	}
}

// TestTCPTLSDialChecksServer: a dialer refuses a listener whose
// certificate another CA signed, or that does not name the host it
// expects.
func TestTCPTLSDialChecksServer(t *testing.T) {
	server, client, _ := devTLS(t)
	otherServer, _, _ := devTLS(t)
	renamed := client.Clone()
	renamed.ServerName = "elsewhere"
	for _, c := range []struct {
		name        string
		srv, dialer *tls.Config
	}{
		{"server of another CA", otherServer, client},
		{"server not named", server, renamed},
	} {
		ln, err := (&rdma.TCP{TLS: c.srv}).Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		qp, err := (&rdma.TCP{TLS: c.dialer}).Dial(ctx, ln.Addr(), rdma.ConnConfig{CQ: rdma.NewCQ()})
		cancel()
		ln.Close()
		if !errors.Is(err, rdma.ErrAuth) {
			if qp != nil {
				qp.Close()
			}
			t.Fatalf("%s: dial: %v, want ErrAuth", c.name, err)
		}
	}
}

// TestTCPTLSListenNeedsClientAuth: a listener's configuration must
// require and verify client certificates.
func TestTCPTLSListenNeedsClientAuth(t *testing.T) {
	server, _, _ := devTLS(t)
	lax := server.Clone()
	lax.ClientAuth = tls.VerifyClientCertIfGiven
	if ln, err := (&rdma.TCP{TLS: lax}).Listen("127.0.0.1:0"); !errors.Is(err, rdma.ErrAuth) {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("listen without required client certificates: %v, want ErrAuth", err)
	}
}
