package engine

import (
	"cmp"
	"errors"
	"slices"
	"sync"
)

// ack is what an appended client write waits for before it is
// acknowledged: the log durable up to end (sync mode), and its
// replicator's acknowledgement of end.
type ack struct {
	end  uint64
	sync bool
	rep  *replicatorBox
}

// waits reports whether waiting for a may wait for other goroutines.
func (a ack) waits() bool { return a.sync || (a.rep != nil && a.rep.waits()) }

// acknowledgedNow reports, without waiting, whether wait(a) would return
// nil at once: the log durable up to a.end if a.sync, and a replicator
// that is a TryAcknowledger telling so (one that is not is waited for).
func (a ack) acknowledgedNow(l *vlog) bool {
	if a.sync && l.durable.Load() < a.end {
		return false
	}
	if a.rep == nil {
		return true
	}
	ta, ok := a.rep.Replicator.(TryAcknowledger)
	return ok && ta.TryAcknowledged(a.end)
}

// wait waits for a and returns what keeps the write from being
// acknowledged. here flushes the log on the caller's goroutine
// (vlog.syncHere) rather than the flusher's.
func (r *regionCore) wait(a ack, here bool) error {
	if a.sync {
		sync := r.log.syncTo
		if here {
			sync = r.log.syncHere
		}
		if err := sync(a.end); err != nil {
			return err
		}
	}
	if a.rep != nil {
		wait := a.rep.WaitReplicated
		if a.rep.gate != nil {
			wait = a.rep.gate.WaitAcknowledged
		}
		return wait(a.end)
	}
	return nil
}

// errLater: write queued its wait on the region's acknowledger, which
// reports the write's outcome to its then.
var errLater = errors.New("engine: write acknowledged later")

// acknowledger waits, on one goroutine per region and for all of them at
// once, for the writes TryPutOnce applied without waiting, and reports
// each one's outcome to its caller: a group commit or a replication
// acknowledgement costs one wait per batch instead of a goroutine per
// write. The goroutine runs while writes are queued and ends when none
// are.
type acknowledger struct {
	mu      sync.Mutex
	queue   []pendingAck
	spare   []pendingAck
	running bool
}

type pendingAck struct {
	a    ack
	then func(error)
}

// acknowledgeLater queues a's wait; then gets its outcome. The write
// counts among the region's writers until then (Quiesce lets writes in
// progress finish, their wait included).
func (r *regionCore) acknowledgeLater(a ack, then func(error)) {
	r.writers.Add(1)
	q := &r.acks
	q.mu.Lock()
	q.queue = append(q.queue, pendingAck{a: a, then: then})
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go labeled("acknowledge", r.acknowledge)
	}
}

// acknowledge serves the queue until it is empty. Each round takes every
// queued write and waits for them in log order: the log's group commit
// and the replicators acknowledge in log order, so the first wait covers
// most of the rest, whose waits then return at once. Once a wait fails,
// the later writes on the same replicator get its error without waiting
// (a hung backup costs the round one timeout, not one per write; an error
// for a write that was held after all is what a client retries anyway).
// Callbacks run on this goroutine with no lock held.
func (r *regionCore) acknowledge() {
	q := &r.acks
	for {
		q.mu.Lock()
		batch := q.queue
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.queue, q.spare = q.spare[:0], nil
		q.mu.Unlock()
		slices.SortStableFunc(batch, func(x, y pendingAck) int { return cmp.Compare(x.a.end, y.a.end) })
		var failed error
		var failedOn ack
		for i := range batch {
			a := batch[i].a
			err := failed
			if err == nil || a.sync != failedOn.sync || a.rep != failedOn.rep {
				if err = r.wait(a, true); err != nil {
					failed, failedOn = err, a
				}
			}
			r.writers.Add(-1)
			batch[i].then(err)
			batch[i] = pendingAck{}
		}
		q.mu.Lock()
		q.spare = batch[:0]
		q.mu.Unlock()
	}
}
