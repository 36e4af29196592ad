package region_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
)

// faultKind is one fault the linearizability test injects into region 1's
// replica group.
type faultKind string

const (
	// faultKill: SIGKILL of the primary at a random moment.
	faultKill faultKind = "kill"
	// faultKillAfterSeal: SIGKILL of the primary as soon as it is seen
	// (polling its counters every millisecond) to seal a log segment.
	faultKillAfterSeal faultKind = "kill-after-seal"
	// faultKillDuringShip: SIGKILL of the primary as soon as it is seen to
	// build an index segment (Send-Index ships each as it is built; under
	// Build-Index the backups are replaying the log meanwhile).
	faultKillDuringShip faultKind = "kill-during-index-ship"
	// faultDoubleFailover: SIGKILL of the primary, then of the promoted
	// backup within a second of its promotion, half the time within 150 ms
	// (3 copies only); both are restarted, the second within two sessions
	// and a second.
	faultDoubleFailover faultKind = "double-failover"
	// faultPause: SIGSTOP of the primary past its session (a backup is
	// promoted), then SIGCONT while the lagging clients, frozen on the old
	// map, still call it.
	faultPause faultKind = "pause-past-session"
	// faultRollingRestart: a graceful restart of every replica of the
	// group in turn (backups first), each back in the group before the
	// next, then SIGKILL of the primary.
	faultRollingRestart faultKind = "rolling-restart"
	// faultMasterKill: SIGKILL of the primary, then of the leading master
	// while it fails the region over (after the session expired, before
	// or while the promotion is written); a new master is started.
	faultMasterKill faultKind = "master-kill-mid-failover"
)

var allFaults = []faultKind{faultKill, faultKillAfterSeal, faultKillDuringShip, faultDoubleFailover, faultPause, faultRollingRestart, faultMasterKill}

// faultEvent is one injected fault, in history time.
type faultEvent struct {
	kind    faultKind
	at, end int64  // injection began / the group was whole again
	note    string // victims, timing
}

// injector injects faults into region 1 of a linCluster.
type injector struct {
	t       *testing.T
	c       *linCluster
	h       *linHistory
	rng     *rand.Rand
	lag     []*lagSource
	session time.Duration
	hit     int64 // history time of the fault's first disruptive action
}

// mark records the moment the fault disrupts the group (the first kill,
// stop or pause of a fault).
func (in *injector) mark() {
	if in.hit < 0 {
		in.hit = in.h.now()
	}
}

// freezeLag freezes the lagging clients' map reloads at m until until.
func (in *injector) freezeLag(m *regionmap.Map, until time.Time) {
	for _, s := range in.lag {
		s.freeze(m, until)
	}
}

// kill SIGKILLs server name.
func (in *injector) kill(name string) {
	in.mark()
	in.c.servers[name].p.Kill()
}

// promoted waits (at most 60 s) until region 1 has a primary that is not
// among gone, at a higher epoch than r's; it returns the map, or nil.
func (in *injector) promoted(r regionmap.Assignment, gone ...string) *regionmap.Map {
	m, ok := in.c.waitMapFor(in.t, 60*time.Second, func(m *regionmap.Map) bool {
		nr := m.Region(1)
		return nr.Epoch > r.Epoch && !slices.Contains(gone, nr.Primary)
	})
	if !ok {
		return nil
	}
	return m
}

// linDoubleBackWait bounds how long after the second primary of a double
// failover restarted region 1 may go without a primary: the remaining
// backup promoted, or the second primary back with its new run (it
// recovers from its disk in well under a second; the master publishes its
// run at its next decision).
const linDoubleBackWait = 15 * time.Second

// inject runs one fault of kind k; it returns a note, and an error if the
// cluster did not get through it (no promotion within a minute).
func (in *injector) inject(k faultKind) (string, error) {
	t, c := in.t, in.c
	in.hit = -1
	m := c.load(t)
	r := *m.Region(1)
	victim := r.Primary
	lagFor := func() time.Time { return time.Now().Add(time.Duration(500+in.rng.IntN(2500)) * time.Millisecond) }
	switch k {
	case faultKill, faultKillAfterSeal, faultKillDuringShip:
		note := victim
		switch k {
		case faultKill:
			time.Sleep(time.Duration(in.rng.IntN(300)) * time.Millisecond)
		case faultKillAfterSeal:
			if !c.waitCounter(t, victim, 15*time.Second, func(e engineCounters) uint64 { return e.LogSeals }) {
				note += " (no seal seen within 15 s: killed anyway)"
			} else {
				note += " right after a log segment seal"
			}
		case faultKillDuringShip:
			if !c.waitCounter(t, victim, 15*time.Second, func(e engineCounters) uint64 { return e.IndexSegmentsBuilt }) {
				note += " (no index segment built within 15 s: killed anyway)"
			} else {
				note += " right after it built an index segment"
			}
		}
		in.freezeLag(m, lagFor())
		in.kill(victim)
		nm := in.promoted(r, victim)
		c.restart(t, victim)
		if nm == nil {
			return note, fmt.Errorf("region 1 not failed over a minute after %s was killed", victim)
		}
		return note + fmt.Sprintf(" -> %s", primaryOf(nm, 1)), nil

	case faultDoubleFailover:
		in.freezeLag(m, lagFor())
		in.kill(victim)
		nm := in.promoted(r, victim)
		if nm == nil {
			c.restart(t, victim)
			return victim, fmt.Errorf("region 1 not failed over a minute after %s was killed", victim)
		}
		// Half the time within 150 ms: before the promoted primary's
		// stream reached IN_SYNC, the remaining backup's copy incomplete.
		within := 1000
		if in.rng.IntN(2) == 0 {
			within = 150
		}
		time.Sleep(time.Duration(in.rng.IntN(within)) * time.Millisecond)
		second := primaryOf(nm, 1)
		r2 := *nm.Region(1)
		run2, _ := nm.Server(second)
		in.kill(second)
		// The first victim is restarted as after a single kill (its region
		// was failed over); the second one as a supervisor would, up to two
		// sessions and a second later: before or after the master saw it
		// go. When the remaining backup reported its copy incomplete (the
		// second primary died before its stream's IN_SYNC) the region can
		// only come back with the second primary, from its own disk.
		c.restart(t, victim)
		time.Sleep(time.Duration(in.rng.Int64N(int64(2*in.session + time.Second))))
		c.restart(t, second)
		back := time.Now()
		nm2, ok := c.waitMapFor(t, linDoubleBackWait, func(m *regionmap.Map) bool {
			nr := m.Region(1)
			if nr.Primary == second {
				s, _ := m.Server(second)
				return s.Started != run2.Started // its new run resumed its region
			}
			return nr.Epoch > r2.Epoch && nr.Primary != victim
		})
		note := fmt.Sprintf("%s, then %s", victim, second)
		if !ok {
			return note, fmt.Errorf("region 1 without a primary %v after its second primary %s restarted", linDoubleBackWait, second)
		}
		to := primaryOf(nm2, 1)
		if to == second {
			to += fmt.Sprintf(" (its new run in the map %v after its restart)", time.Since(back).Round(time.Millisecond))
		}
		return note + " -> " + to, nil

	case faultPause:
		in.freezeLag(m, time.Now().Add(time.Hour))
		defer in.freezeLag(nil, time.Time{})
		in.mark()
		c.servers[victim].p.Signal(syscall.SIGSTOP)
		nm := in.promoted(r, victim)
		time.Sleep(time.Duration(in.rng.IntN(500)) * time.Millisecond)
		c.servers[victim].p.Signal(syscall.SIGCONT)
		// The lagging clients keep calling the resumed old primary.
		time.Sleep(time.Duration(1000+in.rng.IntN(2000)) * time.Millisecond)
		if nm == nil {
			return victim, fmt.Errorf("region 1 not failed over a minute after %s was paused", victim)
		}
		return fmt.Sprintf("%s -> %s", victim, primaryOf(nm, 1)), nil

	case faultRollingRestart:
		group := groupOf(m, 1)
		order := append(slices.Clone(group[1:]), group[0])
		for _, name := range order {
			in.mark()
			c.servers[name].p.Stop(t)
			c.restart(t, name)
			if _, ok := c.waitMapFor(t, 60*time.Second, healed); !ok {
				return strings.Join(order, ","), fmt.Errorf("groups not whole a minute after %s restarted", name)
			}
		}
		m = c.load(t)
		r = *m.Region(1)
		victim = r.Primary
		in.freezeLag(m, lagFor())
		in.kill(victim)
		nm := in.promoted(r, victim)
		c.restart(t, victim)
		note := fmt.Sprintf("restarted %s, then killed %s", strings.Join(order, ","), victim)
		if nm == nil {
			return note, fmt.Errorf("region 1 not failed over a minute after %s was killed", victim)
		}
		return note + fmt.Sprintf(" -> %s", primaryOf(nm, 1)), nil

	case faultMasterKill:
		leader := c.leader(t)
		var lm int
		if _, err := fmt.Sscanf(leader, "m%d", &lm); err != nil || lm < 1 || lm > len(c.masters) {
			return "", fmt.Errorf("leading master %q unknown", leader)
		}
		in.freezeLag(m, lagFor())
		in.kill(victim)
		// The session expires after in.session; the master then collects
		// log positions (up to 1 s) and writes the promotion.
		time.Sleep(in.session + time.Duration(in.rng.IntN(1500))*time.Millisecond)
		c.masters[lm-1].Kill()
		c.newMaster(t)
		nm := in.promoted(r, victim)
		c.restart(t, victim)
		note := fmt.Sprintf("%s, then master %s", victim, leader)
		if nm == nil {
			return note, fmt.Errorf("region 1 not failed over a minute after %s and the master were killed", victim)
		}
		return note + fmt.Sprintf(" -> %s", primaryOf(nm, 1)), nil
	}
	return "", fmt.Errorf("unknown fault %q", k)
}
