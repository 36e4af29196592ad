package replication

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
)

// BenchmarkRewriteIndexSegment rewrites the 2 MiB index segments of a level
// of small pairs (the SD mix's dominant size) for a backup through the log
// and index maps, as a Send-Index backup does for every shipped segment.
func BenchmarkRewriteIndexSegment(b *testing.B) {
	o := engine.Options{FS: vfs.NewMem(), Dir: "p", L0Pairs: 1 << 20, SyncMode: engine.SyncModeAsync, GCInterval: -1}
	_, r, rec := recordedRegion(b, o)
	for i := range 150000 {
		// 24-byte keys, 9-byte values: the paper's S pairs (33 B).
		if err := r.Put(fmt.Appendf(nil, "user%020d", uint64(i)*0x9E3779B97F4A7C15%1e19), []byte("value-abc")); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		b.Fatal(err)
	}
	o.Dir = "b"
	backup := openVolume(b, o)
	log, index := NewSegMap(), NewSegMap()
	for s := range rec.logs {
		log.Add(s, s+1000)
	}
	tr, err := NewTranslator(backup.SegmentSize(), log, index)
	if err != nil {
		b.Fatal(err)
	}
	var locals, seqs []uint64
	for _, s := range rec.segs {
		seg, seq, err := backup.AllocSegment()
		if err != nil {
			b.Fatal(err)
		}
		if err := index.Add(s.Segment, seg); err != nil {
			b.Fatal(err)
		}
		locals, seqs = append(locals, seg), append(seqs, seq)
	}
	full := len(rec.segs) - 1 // the last one is partly filled
	if full < 1 {
		b.Fatalf("%d segments shipped", len(rec.segs))
	}
	img := make([]byte, len(rec.segs[0].Data))
	b.SetBytes(int64(len(img)))
	b.ResetTimer()
	for i := range b.N {
		j := i % full
		copy(img, rec.segs[j].Data)
		if _, err := backup.RewriteIndexSegment(img, locals[j], seqs[j], tr.PointerMap()); err != nil {
			b.Fatal(err)
		}
	}
}
