package replication

import (
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// span is a part of a log segment a Build-Index backup lacks: bytes
// [From, End) of segment Segment (records sealed with Seq, at Index in its
// log). Image is the handover half holding it; nil: the primary's own log.
type span struct {
	Index, Segment, Seq uint64
	From, End           int64
	Sealed              bool
	Image               []byte
}

// buildPlan is how a Build-Index backup is brought to its primary's state
// when a stream starts (the primary still): its own point confirmed, the
// old primary's records it
// lacks (Handover, in that primary's terms), then CmdApplyFrom From, then
// the primary's own sealed log it lacks (Own); the mirror then re-sends
// the tail. Seed: no common point, the backup is seeded whole.
type buildPlan struct {
	Seed     bool
	Have     replwire.Applied // the backup's point, confirmed first (CmdApplyFrom)
	Handover []span
	From     *Position
	Own      []span
}

// planBuild plans the start of a Build-Index backup whose answer to the
// check was have (nil: no known point), for a primary whose log is log
// (its segments with indexes, its tail) and which may hold a handover
// from its promotion. Pure: the safety ordering of a Build-Index stream
// start. A backup is caught up only from a point named by the same log
// identity and index, whose segment the primary (or its handover) still
// holds with the same number and record seed, with nothing freed between
// it and the tail; anything else is a seed (never a skip).
func planBuild(have *replwire.Applied, log uint64, logs []engine.LogSegment, tail engine.LogTail, ho *Handover) buildPlan {
	seed := buildPlan{Seed: true}
	switch {
	case have == nil || log == 0:
		return seed
	case have.Log == log:
		own, ok := ownSpans(*have, logs, tail)
		if !ok {
			return seed
		}
		return buildPlan{Have: *have, Own: own}
	case ho != nil && ho.Log != 0 && have.Log == ho.Log:
		hs, ok := handoverSpans(*have, ho.Halves)
		if !ok {
			return seed
		}
		at := ho.At
		at.Log = log
		own, ok := ownSpans(replwire.Applied{Position: at}, logs, tail)
		if !ok {
			return seed
		}
		return buildPlan{Have: *have, Handover: hs, From: &at, Own: own}
	}
	return seed
}

// ownSpans lists the primary's sealed log from point p up to its tail
// (ok false: p is not a point of it, or a segment between was freed).
func ownSpans(p replwire.Applied, logs []engine.LogSegment, tail engine.LogTail) ([]span, bool) {
	const header = engine.SegmentHeaderSize
	if p.Off < header || p.Index > tail.Index {
		return nil, false
	}
	if p.Index == tail.Index {
		return nil, !p.Sealed && p.Segment == tail.Segment && p.Seq == tail.Seq && p.Off <= tail.Offset
	}
	byIdx := make(map[uint64]engine.LogSegment, len(logs))
	for _, l := range logs {
		byIdx[l.Index] = l
	}
	first := p.Index
	if p.Sealed {
		if l, ok := byIdx[p.Index]; ok && (l.Segment != p.Segment || l.Seq != p.Seq) {
			return nil, false
		}
		first++ // the backup holds p's segment whole
	}
	var out []span
	for i := first; i < tail.Index; i++ {
		l, ok := byIdx[i]
		if !ok || l.End == 0 {
			return nil, false // freed since (a gap), or never sealed
		}
		from := int64(header)
		if i == p.Index {
			if l.Segment != p.Segment || l.Seq != p.Seq || p.Off > l.End {
				return nil, false
			}
			from = p.Off
		}
		out = append(out, span{Index: i, Segment: l.Segment, Seq: l.Seq, From: from, End: l.End, Sealed: true})
	}
	return out, true
}

// handoverSpans lists the old primary's records in the handover's halves
// from point p on (ok false: p is not in them).
func handoverSpans(p replwire.Applied, halves []HalfImage) ([]span, bool) {
	const header = engine.SegmentHeaderSize
	for i, h := range halves {
		var from int64
		switch {
		case h.Index == p.Index && !p.Sealed:
			if h.Segment != p.Segment || h.Seq != p.Seq || p.Off < header || p.Off > h.End {
				return nil, false
			}
			from = p.Off
		case h.Index == p.Index+1 && p.Sealed:
			from = header
		default:
			continue
		}
		var out []span
		for j := i; j < len(halves); j++ {
			x := halves[j]
			if j > i {
				if x.Index != halves[j-1].Index+1 {
					return nil, false
				}
				from = header
			}
			if x.End < from {
				return nil, false
			}
			out = append(out, span{Index: x.Index, Segment: x.Segment, Seq: x.Seq, From: from, End: x.End, Sealed: j < len(halves)-1, Image: x.Image})
		}
		return out, true
	}
	return nil, false
}
