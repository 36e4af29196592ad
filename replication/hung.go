package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// ErrBackupHung: a backup's outstanding commands or mirror WRITEs
// completed nothing for ShipperConfig.HungAfter; the stream dropped it as
// it drops a failed one.
var ErrBackupHung = errors.New("replication: backup hung")

// Hung backups. A backup that stops completing what it was sent (its
// process stopped, a network partition that keeps its connections open,
// a handler stuck) breaks nothing the transport sees: its WRITEs (tcp) or
// commands (every transport: a stopped process copies nothing out of its
// ring) just stay outstanding, and every write of the region soon waits
// for them: the next segment switch waits for the backup's flush of the
// buffer half it reuses, a compaction for its index-segment credits, a
// write for its WRITE. The hang watchdog drops such a backup after
// HungAfter without progress instead of after the 30 s Timeout.
//
// Progress is measured per backup and per channel, on completions: a
// command channel with a Send in flight makes progress when a Send
// returns; a mirror with WRITEs posted and not all completed, when the
// backup's acknowledged position moves. A channel with nothing outstanding
// is idle, never hung, however long it stays so; a slow backup whose
// commands and WRITEs keep completing is never hung either (each one
// restarts its clock). The two channels are watched apart: over shm a
// stopped backup's WRITEs still complete (the primary copies into its
// memory) while its commands do not.
//
// The watchdog samples every HungAfter/4 and counts, per channel, the time
// between consecutive samples that both saw the same outstanding work and
// no completion; each interval counts for at most two periods, so a pause
// of the primary itself (a GC or scheduling stall, SIGSTOP) is not blamed
// on its backups. A backup is thus dropped between HungAfter and
// HungAfter plus a period after its last completion (or after its work
// became outstanding).

// hungState is what the watchdog saw of one backup at its last sample.
// Only the watchdog goroutine touches it.
type hungState struct {
	cmdBusy  bool   // a Send was in flight
	cmdSends uint64 // Sends returned by then
	cmdStall time.Duration
	wrOut    bool // WRITEs outstanding
	wrAck    Pos  // acknowledged position by then
	wrStall  time.Duration
}

// watchHung runs the hang watchdog until the shipper stops: a sample
// every period, or per tick of ticks when it is set (tests).
func (s *Shipper) watchHung(ticks <-chan time.Time, period time.Duration) {
	defer s.wg.Done()
	if ticks == nil {
		t := time.NewTicker(period)
		defer t.Stop()
		ticks = t.C
	}
	states := map[string]*hungState{}
	var last time.Time
	for {
		select {
		case <-s.stopCtx.Done():
			return
		case now := <-ticks:
			var dt time.Duration
			if !last.IsZero() {
				dt = min(max(now.Sub(last), 0), 2*period)
			}
			last = now
			s.checkHung(states, dt)
			if s.cfg.hungSampled != nil {
				s.cfg.hungSampled <- struct{}{}
			}
		}
	}
}

// checkHung takes one sample, dt after the previous one, and drops every
// backup a channel of which has been stalled for HungAfter, as a failed
// command drops it (dropBackup: marked dead, its Send in flight cancelled,
// dropped from the mirror, which reports it through OnDrop, and only then
// left out of the stream's waits).
func (s *Shipper) checkHung(states map[string]*hungState, dt time.Duration) {
	writes := s.cfg.Mirror.progress() // the mirror's lock, never under s.mu
	type drop struct {
		b   *sender
		err error
	}
	var drops []drop
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	for _, b := range s.backups {
		if b.dead {
			delete(states, b.name)
			continue
		}
		st := states[b.name]
		if st == nil {
			st = &hungState{}
			states[b.name] = st
		}
		if b.busy && st.cmdBusy && b.sends == st.cmdSends {
			st.cmdStall += dt
		} else {
			st.cmdStall = 0
		}
		st.cmdBusy, st.cmdSends = b.busy, b.sends
		w, live := writes[b.name]
		if live && w.outstanding && st.wrOut && w.ack == st.wrAck {
			st.wrStall += dt
		} else {
			st.wrStall = 0
		}
		st.wrOut, st.wrAck = live && w.outstanding, w.ack
		var err error
		switch {
		case st.cmdStall >= s.cfg.HungAfter:
			err = fmt.Errorf("replication: backup %s: %w: its command has not completed in %v", b.name, ErrBackupHung, st.cmdStall)
		case st.wrStall >= s.cfg.HungAfter:
			err = fmt.Errorf("replication: backup %s: %w: none of its outstanding WRITEs completed in %v", b.name, ErrBackupHung, st.wrStall)
		default:
			continue
		}
		s.killLocked(b, err) // the stream's waits still count it: see leave
		delete(states, b.name)
		drops = append(drops, drop{b, err})
	}
	s.mu.Unlock()
	for _, d := range drops {
		s.leave(d.b, d.err)
		s.cfg.Log.Error("backup dropped from the region's replica set", zap.Uint64("region", s.cfg.Region.Desc().ID), zap.String("backup", d.b.name), zap.Error(d.err))
	}
}

// watchedLink is a backup's Link as its shipper uses it: the watchdog sees
// each Send (in flight, then returned), a drop ends the Send in flight at
// once, and a dropped backup is sent nothing more.
type watchedLink struct {
	s *Shipper
	b *sender
	l Link
}

func (w *watchedLink) Send(ctx context.Context, c *Command) ([]byte, error) {
	s, b := w.s, w.b
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if b.dead {
		err := b.why
		s.mu.Unlock()
		return nil, err
	}
	b.busy, b.cancel = true, cancel
	s.mu.Unlock()
	reply, err := w.l.Send(ctx, c)
	s.mu.Lock()
	b.busy, b.cancel = false, nil
	b.sends++
	if err != nil && b.dead {
		err = b.why // cancelled by the drop: say why
	}
	s.mu.Unlock()
	return reply, err
}

// Dropping a backup is two steps, in this order, and the order is a
// safety one:
//
//  1. killLocked (under s.mu): nothing more is queued for or sent to the
//     backup (its queue is discarded, its Send in flight ends). The
//     stream's waits (LogSealed's switch, SegmentBuilt's credits, Idle and
//     so settle) still count it, as not done: they block.
//  2. leave (without s.mu): Mirror.Drop, so that no further WRITE reaches
//     its buffer, then the backup is marked left and the waits go on
//     without it.
//
// A dropped backup may resume (a stopped process, a stuck handler) and
// apply the commands already in its ring, the flush of a sealed buffer
// half among them; until the master publishes its group without it, its
// copy counts as complete, so the half must still hold what the flush
// names. The waits are what lets the mirror reuse a half (the switch to
// the next segment waits for every counted backup's flush of the half it
// reuses; the attach's tail waits for the catch-up of a half a kept buffer
// may hold): were a backup counted out before it left the mirror, the
// next segment's marker and records could overwrite the half it never
// flushed. A backup the mirror dropped first (mirrorDropped) takes both
// steps at once.

// killLocked marks b dead for err (step 1 above): its queue is discarded,
// a Send in flight ends. The caller then calls leave(b, err) after
// releasing s.mu, unless the mirror dropped b already (mirrorDropped);
// until then the stream's waits block on b. Called with s.mu held.
func (s *Shipper) killLocked(b *sender, err error) {
	if b.dead {
		return
	}
	b.dead, b.queue, b.why = true, nil, err
	if b.cancel != nil {
		b.cancel()
	}
	s.cond.Broadcast()
}

// leave drops a killed backup from the mirror (no WRITE reaches it from
// the return of Mirror.Drop on), then lets the stream's waits go on
// without it (step 2 above). Called without s.mu (the mirror's lock is
// never taken under it).
func (s *Shipper) leave(b *sender, err error) {
	s.cfg.Mirror.Drop(b.name, err)
	s.mu.Lock()
	b.left = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// dropBackup drops b for err: killed, then out of the mirror, then out of
// the stream's waits. Called without s.mu.
func (s *Shipper) dropBackup(b *sender, err error) {
	s.mu.Lock()
	s.killLocked(b, err)
	s.mu.Unlock()
	s.leave(b, err)
}
