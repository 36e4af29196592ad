package engine

import (
	"bytes"

	"github.com/google/btree"
)

// l0Item is one key of the in-memory L0.
type l0Item struct {
	key []byte
	e   entry
}

func l0Less(a, b l0Item) bool { return bytes.Compare(a.key, b.key) < 0 }

// memtable is the in-memory L0: an ordered map from key to log entry. It is
// not synchronized; the region's mutex guards it. A frozen memtable (the one
// being compacted) is never modified again.
type memtable struct {
	t       *btree.BTreeG[l0Item]
	kvBytes int64
}

func newMemtable() *memtable {
	return &memtable{t: btree.NewG[l0Item](32, l0Less)}
}

// put inserts or replaces key and returns the entry it replaced, if any.
func (m *memtable) put(key []byte, e entry) (entry, bool) {
	old, ok := m.t.ReplaceOrInsert(l0Item{key: key, e: e})
	if ok {
		m.kvBytes -= int64(len(old.key)) + int64(old.e.vlen)
	}
	m.kvBytes += int64(len(key)) + int64(e.vlen)
	return old.e, ok
}

func (m *memtable) get(key []byte) (entry, bool) {
	it, ok := m.t.Get(l0Item{key: key})
	return it.e, ok
}

func (m *memtable) len() int { return m.t.Len() }

// memIter iterates a memtable snapshot (a clone, or a frozen memtable) in
// key order, pulling small batches so iteration never holds a lock.
type memIter struct {
	t     *btree.BTreeG[l0Item]
	batch []l0Item
	i     int
	end   []byte
	done  bool
}

func newMemIter(t *btree.BTreeG[l0Item], start, end []byte) *memIter {
	it := &memIter{t: t, end: end}
	it.fill(start, false)
	return it
}

const memIterBatch = 128

func (it *memIter) fill(from []byte, skipFirst bool) {
	it.batch, it.i = it.batch[:0], 0
	visit := func(item l0Item) bool {
		if skipFirst && bytes.Equal(item.key, from) {
			return true
		}
		if it.end != nil && bytes.Compare(item.key, it.end) >= 0 {
			it.done = true
			return false
		}
		it.batch = append(it.batch, item)
		return len(it.batch) < memIterBatch
	}
	if from == nil {
		it.t.Ascend(visit)
	} else {
		it.t.AscendGreaterOrEqual(l0Item{key: from}, visit)
	}
	if len(it.batch) < memIterBatch {
		it.done = true
	}
}

// valid reports whether the iterator is positioned on an item.
func (it *memIter) valid() bool { return it.i < len(it.batch) }

func (it *memIter) key() []byte  { return it.batch[it.i].key }
func (it *memIter) entry() entry { return it.batch[it.i].e }
func (it *memIter) error() error { return nil }

func (it *memIter) next() {
	it.i++
	if it.i >= len(it.batch) && !it.done && len(it.batch) > 0 {
		last := it.batch[len(it.batch)-1].key
		it.fill(last, true)
	}
}
