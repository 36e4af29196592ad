package rdma

import (
	"errors"
	"path/filepath"
	"runtime"
	"testing"
)

// shmPair connects two shm QPs: a exposes nothing, b a region of size
// bytes.
func shmPair(t *testing.T, size int) (a, b *shmQP, amr *MR) {
	qa, qb, _, _, amr, _ := connectPair(t, &Shm{}, filepath.Join(t.TempDir(), "s"), size)
	return qa.(*shmQP), qb.(*shmQP), amr
}

// TestShmDoorbellToDeadPeerIsLost: a solicited WRITE whose doorbell
// finds the socket gone fails as the socket's end says: ErrPeerLost when
// the peer died (no goodbye), ErrPeerGone (not ErrPeerLost) when it
// closed. The WRITE is posted right after the peer's end with one P, so
// this side's reader has usually not run yet and the doorbell's failed
// send sees the end first (when the reader runs first, the WRITE fails
// with its verdict, which must be the same).
func TestShmDoorbellToDeadPeerIsLost(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, c := range []struct {
		name string
		end  func(b *shmQP)
		lost bool
	}{
		{"died", (*shmQP).sever, true},
		{"closed", func(b *shmQP) { b.Close() }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b, amr := shmPair(t, 4096)
			b.ReqNotify() // armed: the next solicited WRITE rings
			r := a.PeerRegions()[0]
			c.end(b)
			err := a.PostWrite(WriteWR{ID: 1, Local: amr, Len: 8, Remote: r, Solicited: true})
			if err == nil {
				err = a.Err()
			}
			if c.lost && !errors.Is(err, ErrPeerLost) {
				t.Fatalf("a WRITE to a peer that died: %v, want ErrPeerLost", err)
			}
			if !c.lost && (!errors.Is(err, ErrPeerGone) || errors.Is(err, ErrPeerLost)) {
				t.Fatalf("a WRITE to a peer that closed: %v, want ErrPeerGone, not ErrPeerLost", err)
			}
		})
	}
}
