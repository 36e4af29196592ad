package engine

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// readSizesFS records the length of every ReadAt on the files it opens.
type readSizesFS struct {
	vfs.FS
	mu    sync.Mutex
	sizes map[int]int
}

func (fs *readSizesFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return readSizesFile{File: f, fs: fs}, nil
}

type readSizesFile struct {
	vfs.File
	fs *readSizesFS
}

func (f readSizesFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	f.fs.sizes[len(p)]++
	f.fs.mu.Unlock()
	return f.File.ReadAt(p, off)
}

// TestCompactionBypassReadsSegments: with CompactionBypassCache, merges read
// their inputs' lower nodes a segment at a time (few node-sized reads, as
// many bytes but the segments' headers), and the levels they build hold what was put.
func TestCompactionBypassReadsSegments(t *testing.T) {
	seed := testSeed(t)
	run := func(bypass bool) (nodeReads, bigReads int, compRead uint64) {
		fs := &readSizesFS{FS: vfs.NewMem(), sizes: map[int]int{}}
		o := smallOpts(fs)
		o.CompactionBypassCache, o.CacheBytes = bypass, 0
		v := mustOpen(t, o)
		defer v.Close()
		r := mustRegion(t, v, 1)
		r.Resume()
		rng := rand.New(rand.NewSource(seed))
		model := map[string]string{}
		for i := range 40000 {
			k := key(rng.Intn(20000))
			val := fmt.Sprintf("v%d-%s", i, bytes.Repeat([]byte("x"), rng.Intn(64)))
			if err := r.Put(k, []byte(val)); err != nil {
				t.Fatal(err)
			}
			model[string(k)] = val
		}
		if err := r.Compact(); err != nil {
			t.Fatal(err)
		}
		if err := r.WaitIdle(); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(model))
		for k := range model {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		it := r.Scan(nil, nil)
		i := 0
		for it.Next() {
			if i >= len(keys) || string(it.Key()) != keys[i] || string(it.Value()) != model[keys[i]] {
				t.Fatalf("bypass %v, seed %d: scan position %d: got %q=%q", bypass, seed, i, it.Key(), it.Value())
			}
			i++
		}
		if err := it.Close(); err != nil || i != len(keys) {
			t.Fatalf("bypass %v, seed %d: scan: %v after %d of %d keys", bypass, seed, err, i, len(keys))
		}
		if len(r.Levels()) < 3 {
			t.Fatalf("seed %d: %d levels: the merges read little", seed, len(r.Levels()))
		}
		fs.mu.Lock()
		defer fs.mu.Unlock()
		for n, c := range fs.sizes {
			switch {
			case n == o.NodeSize:
				nodeReads += c
			case n > o.NodeSize:
				bigReads += c
			}
		}
		return nodeReads, bigReads, v.Stats().BytesRead[IOCompaction]
	}
	n0, big0, b0 := run(false)
	n1, big1, b1 := run(true)
	t.Logf("seed %d: node-sized reads %d, larger %d, compaction bytes read %d without the option; %d, %d, %d with it",
		seed, n0, big0, b0, n1, big1, b1)
	if n0 < 100 {
		t.Fatalf("without the option only %d node reads: the merges read too little to show anything", n0)
	}
	if big1 == 0 || 10*n1 > n0 {
		t.Fatalf("with the option %d node-sized reads and %d larger ones (%d node reads without)", n1, big1, n0)
	}
	// Segment headers aside (a small test geometry's levels are mostly a
	// few nodes in a segment), the same bytes: each segment read once.
	if nodes := b1 - uint64(big1)*segHeaderSize; 100*nodes > 115*b0 {
		t.Fatalf("with the option merges read %d bytes (%d of them nodes, in %d segment reads), %d without: segments are read more than once",
			b1, nodes, big1, b0)
	}
}
