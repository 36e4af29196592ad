package rdma_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// TestShmRefusesDisallowedUID: a listener whose allowed uids leave out
// this process's refuses its dial before reading its connection request
// (Accept never sees it, nothing is mapped) and tells OnRefused; by default (its own uid) the
// same dialer connects.
func TestShmRefusesDisallowedUID(t *testing.T) {
	self := uint32(os.Getuid())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mr, err := rdma.Register(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()

	refused := make(chan error, 1)
	strict, err := (&rdma.Shm{PeerUIDs: []uint32{self + 1}, OnRefused: func(err error) { refused <- err }}).Listen(filepath.Join(t.TempDir(), "strict"))
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	qp, err := (&rdma.Shm{}).Dial(ctx, strict.Addr(), rdma.ConnConfig{CQ: rdma.NewCQ(), Expose: []*rdma.MR{mr}, Private: []byte("hello")})
	if !errors.Is(err, rdma.ErrRejected) {
		if qp != nil {
			qp.Close()
		}
		t.Fatalf("dial as uid %d to a listener allowing only %d: %v, want ErrRejected", self, self+1, err)
	}
	actx, acancel := context.WithTimeout(ctx, 200*time.Millisecond)
	req, err := strict.Accept(actx)
	acancel()
	if err == nil {
		req.Reject()
		t.Fatalf("the refused request reached Accept (private %q)", req.Private())
	}
	select {
	case err := <-refused:
		if !errors.Is(err, rdma.ErrAuth) {
			t.Fatalf("OnRefused heard %v, want ErrAuth", err)
		}
	case <-ctx.Done():
		t.Fatal("OnRefused not called")
	}

	open, err := (&rdma.Shm{}).Listen(filepath.Join(t.TempDir(), "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	peer := make(chan uint32, 1)
	go func() {
		if req, err := open.Accept(ctx); err == nil {
			if cr, ok := req.(rdma.Credentialed); ok {
				peer <- cr.PeerUID()
			}
			_, _ = req.Accept(rdma.ConnConfig{CQ: rdma.NewCQ()})
		}
		close(peer)
	}()
	qp, err = (&rdma.Shm{}).Dial(ctx, open.Addr(), rdma.ConnConfig{CQ: rdma.NewCQ(), Expose: []*rdma.MR{mr}})
	if err != nil {
		t.Fatalf("dial with the default allowed uids: %v", err)
	}
	qp.Close()
	// The request tells who connected (the server checks it again for
	// replication: a client's uid may connect, not replicate).
	if uid, ok := <-peer; !ok || uid != self {
		t.Fatalf("the connection request's peer uid: %d (%v), want %d", uid, ok, self)
	}
}
