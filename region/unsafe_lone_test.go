package region

import (
	"context"
	"fmt"
	"testing"
)

// TestUnsafeLoneAckSkipsSyncs: a lone async primary fdatasyncs every write
// before its reply, unless the server runs with UnsafeLoneAck (the
// benchmarks' No-Replication), where its puts cost no fdatasync.
func TestUnsafeLoneAckSkipsSyncs(t *testing.T) {
	const puts = 100
	for _, unsafe := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsafe=%v", unsafe), func(t *testing.T) {
			s, cl := loneServer(t, t.TempDir(), func(c *Config) { c.SyncMode, c.UnsafeLoneAck = "async", unsafe })
			before := s.vol.Stats().Syncs
			for i := range puts {
				if err := cl.Put(context.Background(), dkey(i), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			syncs := s.vol.Stats().Syncs - before
			if unsafe && syncs > puts/10 {
				t.Fatalf("%d fdatasyncs for %d puts with UnsafeLoneAck, want almost none", syncs, puts)
			}
			if !unsafe && syncs < puts {
				t.Fatalf("%d fdatasyncs for %d puts of a lone primary, want one each", syncs, puts)
			}
		})
	}
}
