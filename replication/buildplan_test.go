package replication

import (
	"testing"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// TestPlanBuild: where a Build-Index stream starts a backup from, for
// every kind of answer to the check.
func TestPlanBuild(t *testing.T) {
	const h = engine.SegmentHeaderSize
	// The primary's log (identity 9): index 4 (seg 20) and 5 (seg 21)
	// sealed, 6 (seg 22) the tail at 5000; index 3 was freed.
	logs := []engine.LogSegment{{Segment: 20, Seq: 200, End: 9000, Index: 4}, {Segment: 21, Seq: 210, End: 8000, Index: 5}, {Segment: 22, Seq: 220, Index: 6}}
	tail := engine.LogTail{Segment: 22, Seq: 220, Index: 6, Offset: 5000}
	// A handover of old primary 5: its segments 30 (index 11, sealed at
	// 7000) and 31 (index 12, tail up to 6000); the promoted region's own
	// point after the replay is index 5 (seg 21) offset 100... i.e. in
	// this log.
	ho := &Handover{Log: 5, Halves: []HalfImage{{Index: 11, Segment: 30, Seq: 300, End: 7000}, {Index: 12, Segment: 31, Seq: 310, End: 6000}},
		At: Position{Index: 5, Segment: 21, Seq: 210, Off: 7000}}
	pos := func(log, idx, seg, seq uint64, off int64, sealed bool) *replwire.Applied {
		return &replwire.Applied{Position: Position{Log: log, Index: idx, Segment: seg, Seq: seq, Off: off}, Sealed: sealed}
	}
	type want struct {
		seed     bool
		handover []int64 // From of each handover span
		own      []uint64
	}
	cases := []struct {
		name string
		have *replwire.Applied
		ho   *Handover
		want want
	}{
		{"no point: seed", nil, nil, want{seed: true}},
		{"in the tail", pos(9, 6, 22, 220, 4500, false), nil, want{}},
		{"past the tail's end", pos(9, 6, 22, 220, 5001, false), nil, want{seed: true}},
		{"in a sealed segment", pos(9, 4, 20, 200, 6000, false), nil, want{own: []uint64{20, 21}}},
		{"segment sealed whole", pos(9, 4, 20, 200, 9000, true), nil, want{own: []uint64{21}}},
		{"last sealed whole", pos(9, 5, 21, 210, 8000, true), nil, want{}},
		{"in a freed segment", pos(9, 3, 19, 190, 6000, false), nil, want{seed: true}},
		{"same number, other seq", pos(9, 4, 20, 201, 6000, false), nil, want{seed: true}},
		{"same number and seq, another log", pos(8, 6, 22, 220, 4500, false), nil, want{seed: true}},
		{"old primary's point in the handover", pos(5, 11, 30, 300, 5000, false), ho, want{handover: []int64{5000, h}, own: []uint64{21}}},
		{"old primary's segment sealed whole", pos(5, 11, 30, 300, 7000, true), ho, want{handover: []int64{h}, own: []uint64{21}}},
		{"old primary's point past the handover", pos(5, 12, 31, 310, 6500, false), ho, want{seed: true}},
		{"old primary's point before the handover", pos(5, 10, 29, 290, 5000, false), ho, want{seed: true}},
		{"old primary's point, no handover", pos(5, 11, 30, 300, 5000, false), nil, want{seed: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planBuild(c.have, 9, logs, tail, c.ho)
			if p.Seed != c.want.seed {
				t.Fatalf("seed %v, want %v (%+v)", p.Seed, c.want.seed, p)
			}
			if p.Seed {
				return
			}
			if p.Have != *c.have {
				t.Fatalf("confirms %+v, want the backup's %+v", p.Have, *c.have)
			}
			if len(p.Handover) != len(c.want.handover) {
				t.Fatalf("handover spans %+v, want froms %v", p.Handover, c.want.handover)
			}
			for i, sp := range p.Handover {
				if sp.From != c.want.handover[i] || sp.Sealed != (i < len(p.Handover)-1 || sp.Index == 11) {
					t.Fatalf("handover span %d: %+v", i, sp)
				}
			}
			if (p.From != nil) != (c.ho != nil) || (p.From != nil && (p.From.Log != 9 || p.From.Index != 5 || p.From.Off != 7000)) {
				t.Fatalf("apply-from %+v", p.From)
			}
			if len(p.Own) != len(c.want.own) {
				t.Fatalf("own spans %+v, want segments %v", p.Own, c.want.own)
			}
			for i, sp := range p.Own {
				if sp.Segment != c.want.own[i] || !sp.Sealed {
					t.Fatalf("own span %d: %+v, want segment %d", i, sp, c.want.own[i])
				}
			}
		})
	}
}
