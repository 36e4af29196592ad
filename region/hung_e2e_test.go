package region_test

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
)

// TestE2EBackupPausedDropped: 4 servers, 3 regions, 3-way Send-Index
// replication over shm, a 1 s session. Clients write to every region
// while rs4, a backup of some regions and primary of none, is stopped
// (SIGSTOP): its WRITEs still land (shm) but it answers no command, and
// the writes of its regions soon wait for it. Its primaries drop it as
// hung after 2 s (twice the session) and report it; its session has
// expired meanwhile and the master redoes the groups; the regions write
// on (4 KiB values: a segment switch waits for the paused backup's flush
// soon). The longest write outage stays below 6 s, while the pause lasts
// 7 s and more: before the bound the writes waited for the backup until
// it resumed, or the 30 s command timeout dropped it. rs4 then resumes
// (SIGCONT): fenced (its session expired, its streams dropped it), it
// registers again, is added back and seeded; every acknowledged write
// reads back.
func TestE2EBackupPausedDropped(t *testing.T) {
	c := startManagedL0(t, 4, "100")
	var keys []string
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("k%06d.h", i*800+7))
	}
	m0 := c.cl.Map()
	victim := "rs4"
	var backed []uint64
	for _, r := range m0.Regions {
		if r.Primary == victim {
			t.Fatalf("%s is primary of region %d", victim, r.ID)
		}
		if slices.Contains(r.Group(), victim) {
			backed = append(backed, r.ID)
		}
	}
	if len(backed) == 0 {
		t.Fatalf("%s backs up no region: %+v", victim, m0.Regions)
	}
	stop := make(chan struct{})
	w := runWriters(t, c.cl, stop, keys)
	// 4 KiB values into the paused backup's regions seal a 64 KiB log
	// segment every 16 writes: a switch soon waits for the paused
	// backup's flush of the half it reuses, holding every write of the
	// region (and its re-attach's quiesce) until the backup is dropped.
	var big []string
	for _, id := range backed {
		r := m0.Region(id)
		for i := range 4 {
			big = append(big, fmt.Sprintf("%s.big%d", r.Start, i))
		}
	}
	bw := runSizedWriters(t, c.cl, stop, big, 4<<10)
	time.Sleep(time.Second)
	c.servers[victim].p.Signal(syscall.SIGSTOP)
	paused := time.Now()
	c.waitMap(t, "groups without the paused backup", func(m *regionmap.Map) bool {
		for _, r := range m.Regions {
			if slices.Contains(r.Group(), victim) {
				return false
			}
		}
		return true
	})
	time.Sleep(6 * time.Second) // writes through the groups without it
	c.servers[victim].p.Signal(syscall.SIGCONT)
	pause := time.Since(paused)
	t.Logf("%s paused for %v", victim, pause.Round(time.Millisecond))
	c.waitMap(t, "groups healed", func(m *regionmap.Map) bool {
		for _, r := range m.Regions {
			if len(r.Joining) > 0 || len(r.Backups) != 2 {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second) // writes through the healed groups
	close(stop)
	w.verify(t, c.cl)
	bw.verify(t, c.cl)
	outage := max(w.outage, bw.outage)
	t.Logf("longest write outage while a backup of regions %v was paused: %v (4 KiB values: %v)", backed, outage, bw.outage)
	// Without the hang bound the writes waited for the backup until it
	// resumed (at most the 30 s command timeout): an outage as long as
	// the pause.
	if outage > 6*time.Second || outage > pause-time.Second {
		t.Errorf("longest write outage %v (pause %v): a paused backup held its regions' writes", outage, pause)
	}
	hung := 0
	for _, id := range backed {
		out := c.servers[m0.Region(id).Primary].p.Output(t)
		if strings.Contains(out, "backup hung") {
			hung++
		}
	}
	if hung == 0 {
		t.Errorf("no primary of regions %v dropped %s as hung", backed, victim)
	}
}
