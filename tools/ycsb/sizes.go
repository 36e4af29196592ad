package ycsb

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Key-value pair sizes of the Tebis paper (key + value bytes), taken from
// Facebook's production size classes.
const (
	SmallPair  = 33
	MediumPair = 123
	LargePair  = 1023
)

// MaxPairSize bounds a fixed pair size.
const MaxPairSize = 1 << 20

// ErrBadSizeMix is returned for an unknown or inconsistent size mix.
var ErrBadSizeMix = errors.New("ycsb: bad kv size mix")

// SizeMix gives the size of every record's key-value pair. Either Fixed is
// positive (every pair is Fixed bytes, key included) or Small, Medium and
// Large are percentages of records with SmallPair, MediumPair and LargePair
// sized pairs, summing to 100.
type SizeMix struct {
	Name                 string
	Small, Medium, Large int
	Fixed                int
}

// The paper's size mixes.
var (
	MixS  = SizeMix{Name: "S", Small: 100}
	MixM  = SizeMix{Name: "M", Medium: 100}
	MixL  = SizeMix{Name: "L", Large: 100}
	MixSD = SizeMix{Name: "SD", Small: 60, Medium: 20, Large: 20}
	MixMD = SizeMix{Name: "MD", Small: 20, Medium: 60, Large: 20}
	MixLD = SizeMix{Name: "LD", Small: 20, Medium: 20, Large: 60}
)

// ParseSizeMix parses S, M, L, SD, MD, LD (any case) or a decimal N meaning
// a fixed pair size of N bytes.
func ParseSizeMix(s string) (SizeMix, error) {
	for _, m := range []SizeMix{MixS, MixM, MixL, MixSD, MixMD, MixLD} {
		if strings.EqualFold(s, m.Name) {
			return m, nil
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return SizeMix{}, fmt.Errorf("%w: %q (want S, M, L, SD, MD, LD or a pair size in bytes)", ErrBadSizeMix, s)
	}
	m := SizeMix{Name: strconv.Itoa(n), Fixed: n}
	return m, m.Validate()
}

// Validate checks the mix.
func (m SizeMix) Validate() error {
	if m.Fixed != 0 {
		if m.Fixed < 1 || m.Fixed > MaxPairSize {
			return fmt.Errorf("%w: fixed pair size %d outside [1, %d]", ErrBadSizeMix, m.Fixed, MaxPairSize)
		}
		return nil
	}
	if m.Small < 0 || m.Medium < 0 || m.Large < 0 || m.Small+m.Medium+m.Large != 100 {
		return fmt.Errorf("%w: percentages %d/%d/%d must be non-negative and sum to 100", ErrBadSizeMix, m.Small, m.Medium, m.Large)
	}
	return nil
}

// String is the mix's name, or its percentages.
func (m SizeMix) String() string {
	if m.Name != "" {
		return m.Name
	}
	if m.Fixed > 0 {
		return strconv.Itoa(m.Fixed)
	}
	return fmt.Sprintf("%d/%d/%d", m.Small, m.Medium, m.Large)
}

// PairSize returns the key+value size of record keynum: a pure function of
// keynum and the mix, so every write of a record has the same size.
func (m SizeMix) PairSize(keynum int64) int {
	if m.Fixed > 0 {
		return m.Fixed
	}
	c := int(mix64(uint64(keynum)^0x5bd1e9955bd1e995) % 100)
	switch {
	case c < m.Small:
		return SmallPair
	case c < m.Small+m.Medium:
		return MediumPair
	}
	return LargePair
}

// MaxPair is the largest pair size the mix produces.
func (m SizeMix) MaxPair() int {
	switch {
	case m.Fixed > 0:
		return m.Fixed
	case m.Large > 0:
		return LargePair
	case m.Medium > 0:
		return MediumPair
	}
	return SmallPair
}

// mix64 is the splitmix64 finalizer: a cheap bijective bit mixer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
