package engine

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

// FuzzMergeRequestTable: a request-table checkpoint chunk (what a log
// record holds and a primary sends a Build-Index backup, CmdRequests)
// merges or fails cleanly; a failed merge changes nothing, and a merged
// table encodes to chunks that merge back into the same table.
func FuzzMergeRequestTable(f *testing.F) {
	now := time.Unix(1000, 0)
	t0 := newReqTable()
	t0.add(RequestID{Client: 9, Seq: 1, Ack: 1}, 10, now)
	t0.add(RequestID{Client: 9, Seq: 3, Ack: 1}, 20, now)
	t0.add(RequestID{Client: 4, Seq: 7, Ack: 5}, 30, now)
	for _, c := range t0.encodeChunks(1 << 10) {
		f.Add(c)
	}
	for _, c := range t0.encodeChunks(reqChunkHeader + reqRowHeader + 8) {
		f.Add(c)
	}
	f.Add(newReqTable().encodeChunks(64)[0])
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		tb := newReqTable()
		if err := tb.merge(b, 50, now); err != nil {
			if len(tb.clients) != 0 {
				t.Fatalf("a failed merge (%v) left %d clients", err, len(tb.clients))
			}
			return
		}
		chunks := tb.encodeChunks(1 << 10)
		again := newReqTable()
		for _, c := range chunks {
			if err := again.merge(c, 50, now); err != nil {
				t.Fatalf("a chunk of a merged table does not merge: %v", err)
			}
		}
		if got := again.encodeChunks(1 << 10); !slices.EqualFunc(got, chunks, bytes.Equal) {
			t.Fatalf("table of %x re-merged differently", b)
		}
		if err := tb.merge(b, 50, now); err != nil {
			t.Fatalf("merging the same chunk twice: %v", err)
		}
		if got := tb.encodeChunks(1 << 10); !slices.EqualFunc(got, chunks, bytes.Equal) {
			t.Fatalf("merging %x twice changed the table", b)
		}
	})
}
