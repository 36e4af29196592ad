package region

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jonboulle/clockwork"
)

// checked returns once the health monitor of s has finished every check
// begun before the call: of three kicks (its channel holds one), the
// third is taken only after the first one's check returned.
func checked(s *Server) {
	for range 3 {
		s.health.kick <- struct{}{}
	}
}

// TestHealthProbesSpaceOnClock: a server out of space probes for it again
// only once probeEvery has passed on its clock since the last probe,
// whatever the system clock says: with room back, it refuses writes
// while the clock stands still and until just before probeEvery; the
// health poll's tick at probeEvery probes, finds room, and writes are
// taken again.
func TestHealthProbesSpaceOnClock(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	mem := vfs.NewMem()
	room := vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30}
	mem.TestingSetDiskUsage(room)
	s, cl := loneServer(t, t.TempDir(), func(c *Config) { c.GrowStep = 256 << 10 }, WithFS(mem), WithClock(clk))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Its tickers (the health poll's, the re-attach's) wait on its clock,
	// from the clock's start: the poll ticks at every healthPoll from it.
	if err := clk.BlockUntilContext(ctx, 2); err != nil {
		t.Fatalf("the server's health poll ticker never waited on its clock: %v", err)
	}

	// Full: no more than the reserve is free.
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 16 << 20, TotalBytes: 2 << 30, UsedBytes: 2<<30 - 16<<20})
	acked := map[int]string{}
	n, err := fillServer(t, cl, 0, acked)
	wantStorage(t, err, fmt.Sprintf("put %d on a full disk", n), "no space")
	checked(s) // the refusal's check: no space, probed at once (on a full disk)
	noSpace := func(what string) {
		t.Helper()
		if st := serverHealth(t, s); st.Health != "no-space" {
			t.Fatalf("%s: health %q (%s), want no-space", what, st.Health, st.HealthError)
		}
		wantStorage(t, cl.Put(context.Background(), dkey(n), []byte("x")), what, "no-space")
	}
	noSpace("disk full")

	mem.TestingSetDiskUsage(room)
	checked(s)
	noSpace("room back, the clock standing still")
	clk.Advance(probeEvery - healthPoll) // polls: none probes yet
	checked(s)
	noSpace(fmt.Sprintf("room back, %v after the probe", probeEvery-healthPoll))

	clk.Advance(healthPoll) // the poll's tick at probeEvery after the probe
	waitHealth(t, s, "ok")
	if err := cl.Put(context.Background(), dkey(n), []byte("again")); err != nil {
		t.Fatalf("put after the probe found room: %v", err)
	}
	acked[n] = "again"
	readAcked(t, cl, acked, "space returned")
}
