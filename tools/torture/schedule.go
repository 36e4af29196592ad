package torture

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// The nemesis kinds. Each fault hits the region group of one region
// (picked by the schedule) or a ZooKeeper server or a master, holds for
// the step's Hold, and is healed: killed processes are started again,
// paused ones continued, cuts and shaping removed.
const (
	killPrimary      = "kill-primary"         // SIGKILL a region's primary
	killBackup       = "kill-backup"          // SIGKILL one of its backups
	killMaster       = "kill-master"          // SIGKILL the leading master
	killZK           = "kill-zookeeper"       // SIGKILL a ZooKeeper server
	killTwo          = "kill-two"             // SIGKILL a primary and a backup of its region at once
	pausePrimary     = "pause-primary"        // SIGSTOP a primary, SIGCONT after the hold
	pauseBackup      = "pause-backup"         // SIGSTOP a backup
	pauseMaster      = "pause-master"         // SIGSTOP the leading master
	cutPrimaryZK     = "partition-primary-zk" // a primary cut from every ZooKeeper server, not from its backups and clients
	cutPrimaryBackup = "partition-primary-backup"
	cutClient        = "partition-client-primary" // the checking clients cut from a primary
	cutZKMinority    = "partition-zk-minority"    // one ZooKeeper server cut from the others
	flapLink         = "flapping-link"            // a primary's link to a backup or to ZooKeeper cut and healed every 0.1-1 s
	slowLink         = "slow-link"                // a primary's traffic delayed (netem, or a tbf queue)
	lossyLink        = "lossy-link"               // a primary's traffic partly dropped
	diskFull         = "disk-full"                // a server's file system full (ENOSPC), then space back
	diskError        = "disk-error"               // a server's segment file failing (EIO), then the server restarted
	movePrimary      = "move-primary"             // an operator's move of a live primary to a backup (tebis cluster move-primary)
)

// nemesisKinds is every kind, in a fixed order.
var nemesisKinds = []string{killPrimary, killBackup, killMaster, killZK, killTwo, pausePrimary, pauseBackup, pauseMaster,
	cutPrimaryZK, cutPrimaryBackup, cutClient, cutZKMinority, flapLink, slowLink, lossyLink, diskFull, diskError, movePrimary}

// needsNetwork reports whether kind needs cuts or shaping.
func needsNetwork(kind string) bool {
	switch kind {
	case cutPrimaryZK, cutPrimaryBackup, cutClient, cutZKMinority, flapLink, slowLink, lossyLink:
		return true
	}
	return false
}

// step is one scheduled fault.
type step struct {
	Kind   string
	Region int           // index of the region hit (into the map's regions)
	Pick   int           // which backup, ZooKeeper server or link (modulo the choices)
	Hold   time.Duration // how long the fault lasts before it is healed
	Seed   uint64        // the fault's own randomness (timings within it)
}

func (s step) String() string {
	return fmt.Sprintf("%s (region #%d, pick %d, hold %v)", s.Kind, s.Region, s.Pick, s.Hold.Round(time.Millisecond))
}

// kindsFor returns the kinds a run injects: asked (all if empty) less
// those this cluster cannot take (partitions: the network can cut; root:
// tmpfs can be mounted), with the reasons for those left out.
func kindsFor(asked []string, partitions, root bool, zookeepers int) (kinds []string, left map[string]string, err error) {
	left = map[string]string{}
	if len(asked) == 0 {
		asked = nemesisKinds
	}
	for _, k := range asked {
		if !slices.Contains(nemesisKinds, k) {
			return nil, nil, fmt.Errorf("torture: no nemesis %q (nemeses: %v)", k, nemesisKinds)
		}
		switch {
		case needsNetwork(k) && !partitions:
			left[k] = "network faults need network namespaces (root)"
		case k == diskFull && !root:
			left[k] = "a full file system needs a tmpfs mount (root)"
		case k == cutZKMinority && zookeepers < 3:
			left[k] = "a ZooKeeper minority needs an ensemble of 3"
		default:
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil, left, fmt.Errorf("torture: no nemesis can run here (%v)", left)
	}
	return kinds, left, nil
}

// scheduler draws the run's faults from its seed: a pure function of
// (seed, kinds, session), so a seed replays the same faults. With cover,
// the first len(kinds) steps are every kind once, in a seeded order.
type scheduler struct {
	rng     *rand.Rand
	kinds   []string
	session time.Duration
	first   []string // the covering permutation still to come
}

func newScheduler(seed uint64, kinds []string, session time.Duration, cover bool) *scheduler {
	s := &scheduler{rng: rand.New(rand.NewPCG(seed, 0x70a7)), kinds: kinds, session: session}
	if cover {
		for _, i := range s.rng.Perm(len(kinds)) {
			s.first = append(s.first, kinds[i])
		}
	}
	return s
}

// next returns the next fault.
func (s *scheduler) next() step {
	var k string
	if len(s.first) > 0 {
		k, s.first = s.first[0], s.first[1:]
	} else {
		k = s.kinds[s.rng.IntN(len(s.kinds))]
	}
	st := step{Kind: k, Region: s.rng.IntN(len(splits) + 1), Pick: s.rng.IntN(1 << 16), Seed: s.rng.Uint64()}
	// Holds from half a session (the session survives) to three sessions
	// (a failover happens while the fault lasts).
	st.Hold = s.session/2 + time.Duration(s.rng.Int64N(int64(5*s.session/2)))
	switch k {
	case killPrimary, killBackup, killMaster, killZK, killTwo:
		// How long the victims stay down before they are started again.
		st.Hold = time.Duration(s.rng.Int64N(int64(2 * s.session)))
	case slowLink, lossyLink, flapLink:
		st.Hold = 2*s.session + time.Duration(s.rng.Int64N(int64(2*s.session)))
	case diskFull:
		// Long enough for the volume to need room (a grow step of writes).
		st.Hold = 3*s.session + time.Duration(s.rng.Int64N(int64(3*s.session)))
	}
	return st
}
