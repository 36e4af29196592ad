package engine

import "bytes"

// source is a sorted stream of index entries: L0 or one level.
type source interface {
	valid() bool
	key() []byte
	entry() entry
	next()
	error() error
}

// mergeIter merges sources ordered newest first: for a key present in
// several, the newest entry wins and the others are passed to onShadow.
type mergeIter struct {
	srcs     []source
	onShadow func(key []byte, e entry)
	cur      int // index of the winning source, -1 when exhausted
	err      error
}

func newMergeIter(srcs []source, onShadow func([]byte, entry)) *mergeIter {
	m := &mergeIter{srcs: srcs, onShadow: onShadow}
	m.settle()
	return m
}

func (m *mergeIter) settle() {
	m.cur = -1
	for i, s := range m.srcs {
		if err := s.error(); err != nil {
			m.err = err
			return
		}
		if !s.valid() {
			continue
		}
		if m.cur < 0 || bytes.Compare(s.key(), m.srcs[m.cur].key()) < 0 {
			m.cur = i
		}
	}
}

func (m *mergeIter) valid() bool  { return m.err == nil && m.cur >= 0 }
func (m *mergeIter) key() []byte  { return m.srcs[m.cur].key() }
func (m *mergeIter) entry() entry { return m.srcs[m.cur].entry() }
func (m *mergeIter) error() error { return m.err }

// next moves past the current key in every source.
func (m *mergeIter) next() {
	if !m.valid() {
		return
	}
	k := m.key()
	for i, s := range m.srcs {
		if i != m.cur && s.valid() && bytes.Equal(s.key(), k) {
			if m.onShadow != nil {
				m.onShadow(k, s.entry())
			}
			s.next()
		}
	}
	m.srcs[m.cur].next()
	m.settle()
}
