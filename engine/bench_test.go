package engine

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkPutParallel measures concurrent puts on the real file system.
func BenchmarkPutParallel(b *testing.B) {
	for _, mode := range []SyncMode{SyncModeSync, SyncModeAsync} {
		b.Run(mode.String(), func(b *testing.B) {
			v, err := Open(Options{FS: vfs.Default, Dir: b.TempDir(), SyncMode: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				st := v.Stats()
				b.ReportMetric(float64(b.N)/float64(st.Syncs), "puts/sync")
				v.Close()
			}()
			r, err := v.CreateRegion(RegionDesc{ID: 1})
			if err != nil {
				b.Fatal(err)
			}
			val := make([]byte, 100)
			var n atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if err := r.Put([]byte(fmt.Sprintf("user%016d", i*7919%1000003)), val); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
