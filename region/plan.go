package region

import (
	"fmt"
	"slices"

	"github.com/tebis-go/tebis/client/regionmap"
)

// The region server's decisions on a map, as one pure function: plan
// takes the map and what the server holds of each region (its role, its
// stream, its attach in flight) and returns the steps install takes, in
// order. install (install.go) only carries them out. The orderings that
// safety depends on are plan's, and its table tests hold them:
//
//   - attaches the map supersedes are cancelled first: none may hold a
//     region still, or use a connection of the old map, while the map
//     changes it;
//   - regions the map moves away are deposed (refuse writes, stop
//     routing, then detach: depose.go) before any region is opened,
//     promoted or reopened as a backup;
//   - each region the map gives this server then gets one role step
//     (open a backup, promote the backup copy, keep, open, or refuse an
//     incomplete copy), then one serving step (attach its replication,
//     serve alone, or serve as it is).
//
// A backup's promotion fences its old primary before it promotes: that
// ordering is inside the step (failover.go promote), under the region's
// hello lock, which no pure function can hold.

// role is what this server is for one region.
type role uint8

const (
	roleNone    role = iota // not served here (a copy may sit in the volume)
	roleBackup              // a backup: its replica is open
	rolePrimary             // hosted as primary (serving, or waiting for its stream)
)

// held is what the server holds of one region: plan's input.
type held struct {
	role role
	// stream: a primary's attached replication (Server.primaries), with
	// the epoch and group (joining included) it was attached for.
	stream bool
	epoch  uint64
	group  []string
	// copy: the volume holds the region as a copy (engine.Volume.IsCopy:
	// a backup's, or a follower's) and this server neither hosts nor
	// backs it up; copyErr: reading that failed.
	copy    bool
	copyErr error
	// job: an attach in flight, for this map region (attach.go).
	job *regionmap.Assignment
}

// step is one kind of action of a plan.
type step uint8

const (
	stepSupersede  step = iota + 1 // cancel the region's attach in flight (attach.go abort)
	stepDepose                     // refuse, stop routing, detach (depose.go)
	stepOpenBackup                 // open the region's replica, if not open
	stepPromote                    // fence the old primary, promote the backup copy
	stepKeep                       // still its primary: the handle stays
	stepReattach                   // still its primary, its group or epoch changed: a new stream
	stepOpen                       // open the region from the volume as primary
	stepOpenCopy                   // static map: serve a copy without its replication buffer (the operator's word)
	stepIncomplete                 // managed: named primary, its copy here incomplete: not served
	stepFail                       // the region cannot be installed (err)
	stepAttach                     // replication to attach (routing: unavailable until attached)
	stepAlone                      // no backups and no stream: serve alone, the only copy
	stepServe                      // serve as it is (its stream stays)
)

var stepNames = map[step]string{
	stepSupersede: "supersede", stepDepose: "depose", stepOpenBackup: "open-backup", stepPromote: "promote",
	stepKeep: "keep", stepReattach: "reattach", stepOpen: "open", stepOpenCopy: "open-copy", stepIncomplete: "incomplete",
	stepFail: "fail", stepAttach: "attach", stepAlone: "alone", stepServe: "serve",
}

func (s step) String() string {
	if n, ok := stepNames[s]; ok {
		return n
	}
	return fmt.Sprintf("step(%d)", uint8(s))
}

// action is one step for one region.
type action struct {
	step   step
	region uint64
	err    error // stepFail
}

func (a action) String() string {
	if a.err != nil {
		return fmt.Sprintf("%s %d: %v", a.step, a.region, a.err)
	}
	return fmt.Sprintf("%s %d", a.step, a.region)
}

// plan returns install's actions for map m at server name. known is
// false when m is not for this run of the server (it gives no roles);
// managed is a cluster with a master (an incomplete copy is refused, not
// served). hs is what the server holds, by region; a region it holds
// nothing of may be absent.
func plan(m *regionmap.Map, name string, known, managed bool, hs map[uint64]held) []action {
	var out []action
	ids := make([]uint64, 0, len(hs))
	for id := range hs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if j := hs[id].job; j != nil && supersedes(*j, m.Region(id), name, known) {
			out = append(out, action{step: stepSupersede, region: id})
		}
	}
	for _, id := range ids {
		if hs[id].role != rolePrimary {
			continue
		}
		if r := m.Region(id); !known || r == nil || !r.Serving(name) {
			out = append(out, action{step: stepDepose, region: id})
		}
	}
	if !known {
		return out
	}
	for _, r := range m.Regions {
		h := hs[r.ID]
		if slices.Contains(r.Group(), name) {
			out = append(out, action{step: stepOpenBackup, region: r.ID})
			continue
		}
		if !r.Serving(name) {
			continue // not its primary, or releasing it (a move)
		}
		stream := h.stream
		switch {
		case h.role == roleBackup:
			out = append(out, action{step: stepPromote, region: r.ID})
		case h.role == rolePrimary && stream && (h.epoch != r.Epoch || !sameSet(h.group, r.Group())):
			// Backups joined or left (the epoch grows with every group
			// change, also one whose removal and return this server never
			// saw apart): a new stream.
			out = append(out, action{step: stepReattach, region: r.ID})
			stream = false
		case h.role == rolePrimary:
			out = append(out, action{step: stepKeep, region: r.ID})
		case h.copyErr != nil:
			out = append(out, action{step: stepFail, region: r.ID, err: h.copyErr})
			continue
		case h.copy && managed:
			out = append(out, action{step: stepIncomplete, region: r.ID})
			continue
		case h.copy:
			out = append(out, action{step: stepOpenCopy, region: r.ID})
		default:
			out = append(out, action{step: stepOpen, region: r.ID})
		}
		switch {
		case stream:
			out = append(out, action{step: stepServe, region: r.ID})
		case len(r.Group()) > 0 || h.stream:
			// Backups to attach, or a stream to retire (the group emptied:
			// the attach serves it alone once the old stream is retired).
			out = append(out, action{step: stepAttach, region: r.ID})
		default:
			out = append(out, action{step: stepAlone, region: r.ID})
		}
	}
	return out
}
