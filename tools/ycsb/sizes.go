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
// positive (every pair is Fixed bytes, key included), or Value is positive
// (every value is Value bytes, whatever the key's length), or Small, Medium
// and Large are percentages of records with SmallPair, MediumPair and
// LargePair sized pairs, summing to 100.
type SizeMix struct {
	Name                 string
	Small, Medium, Large int
	Fixed                int
	Value                int
}

// TypicalKeyLen is the length of a hashed YCSB key ("user" and up to 20
// digits; most hashes have 19 or 20): what a fixed value size's pairs are
// assumed to add for the key when only a mean pair size is wanted.
const TypicalKeyLen = 23

// The paper's size mixes.
var (
	MixS  = SizeMix{Name: "S", Small: 100}
	MixM  = SizeMix{Name: "M", Medium: 100}
	MixL  = SizeMix{Name: "L", Large: 100}
	MixSD = SizeMix{Name: "SD", Small: 60, Medium: 20, Large: 20}
	MixMD = SizeMix{Name: "MD", Small: 20, Medium: 60, Large: 20}
	MixLD = SizeMix{Name: "LD", Small: 20, Medium: 20, Large: 60}
)

// ParseSizeMix parses S, M, L, SD, MD, LD (any case), a decimal N meaning a
// fixed pair size of N bytes (key included), or vN (V, any case) meaning a
// fixed value size of N bytes (the key comes on top).
func ParseSizeMix(s string) (SizeMix, error) {
	for _, m := range []SizeMix{MixS, MixM, MixL, MixSD, MixMD, MixLD} {
		if strings.EqualFold(s, m.Name) {
			return m, nil
		}
	}
	if len(s) > 1 && (s[0] == 'v' || s[0] == 'V') {
		n, err := strconv.Atoi(s[1:])
		if err != nil {
			return SizeMix{}, fmt.Errorf("%w: %q (want vN, a value size in bytes)", ErrBadSizeMix, s)
		}
		m := SizeMix{Name: "v" + strconv.Itoa(n), Value: n}
		return m, m.Validate()
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return SizeMix{}, fmt.Errorf("%w: %q (want S, M, L, SD, MD, LD, a pair size in bytes or vN, a value size)", ErrBadSizeMix, s)
	}
	m := SizeMix{Name: strconv.Itoa(n), Fixed: n}
	return m, m.Validate()
}

// Validate checks the mix.
func (m SizeMix) Validate() error {
	if m.Value != 0 {
		if m.Value < 1 || m.Value > MaxPairSize || m.Fixed != 0 || m.Small != 0 || m.Medium != 0 || m.Large != 0 {
			return fmt.Errorf("%w: fixed value size %d outside [1, %d] or mixed with pair sizes", ErrBadSizeMix, m.Value, MaxPairSize)
		}
		return nil
	}
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
	if m.Value > 0 {
		return "v" + strconv.Itoa(m.Value)
	}
	return fmt.Sprintf("%d/%d/%d", m.Small, m.Medium, m.Large)
}

// PairSize returns the key+value size of record keynum: a pure function of
// keynum and the mix, so every write of a record has the same size. For a
// fixed value size it assumes a TypicalKeyLen key (ValueLen is exact).
func (m SizeMix) PairSize(keynum int64) int {
	if m.Fixed > 0 {
		return m.Fixed
	}
	if m.Value > 0 {
		return m.Value + TypicalKeyLen
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

// ValueLen is the value length of record keynum whose key is keyLen bytes:
// the fixed value size, or its pair size minus keyLen, at least one byte.
func (m SizeMix) ValueLen(keynum int64, keyLen int) int {
	if m.Value > 0 {
		return m.Value
	}
	return max(m.PairSize(keynum)-keyLen, minValueLen)
}

// MaxPair bounds the value sizes the mix produces (for a fixed pair size,
// the pair size).
func (m SizeMix) MaxPair() int {
	switch {
	case m.Value > 0:
		return m.Value
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
