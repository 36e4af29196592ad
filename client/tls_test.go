package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/pki"
	"github.com/tebis-go/tebis/rdma"
)

// TestTLSClientNoShmFallback: a client configured for TLS does not fall
// back to a server's shm socket when the map gives the server no tcp
// address: it could not authenticate the listener, which would get its
// rings' memory. A client without TLS does fall back.
func TestTLSClientNoShmFallback(t *testing.T) {
	dir := t.TempDir()
	if _, err := (pki.Dev{Dir: dir, Hosts: []string{"127.0.0.1"}}).Generate(); err != nil {
		t.Fatal(err)
	}
	ln, err := (&rdma.Shm{}).Listen(filepath.Join(dir, "squatter.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed := make(chan struct{}, 4)
	go func() {
		for {
			req, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			dialed <- struct{}{}
			req.Reject()
		}
	}()
	m := regionmap.Single(regionmap.Server{Name: "a", Shm: ln.Addr()})
	cf := pki.ClientFiles(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Open(ctx, client.Config{Map: regionmap.Static{M: m}, Transport: "tcp", Retries: 1,
		TLSCert: cf.Cert, TLSKey: cf.Key, TLSCA: cf.CA})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.Get(ctx, []byte("k"))
	if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "does not fall back to shm") {
		t.Fatalf("a TLS client, the server with shm only: %v", err)
	}
	select {
	case <-dialed:
		t.Fatal("the TLS client dialed the shm socket")
	case <-time.After(100 * time.Millisecond):
	}
	plain, err := client.Open(ctx, client.Config{Map: regionmap.Static{M: m}, Transport: "tcp", Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, _ = plain.Get(ctx, []byte("k"))
	select {
	case <-dialed:
	case <-time.After(5 * time.Second):
		t.Fatal("a plaintext client did not fall back to shm (the test's squatter never heard of it)")
	}
}
