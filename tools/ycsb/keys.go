package ycsb

import "strconv"

// FNV-64 constants as used by YCSB's Utils.fnvhash64.
const (
	fnvOffsetBasis64 = 0xCBF29CE484222325
	fnvPrime64       = 1099511628211
)

// FNVHash64 is YCSB's Utils.fnvhash64: FNV-1 over the 8 little-endian bytes
// of v, returned as a non-negative int64 (Java's Math.abs; the single value
// whose absolute value overflows stays as Java leaves it, negative, and is
// mapped to 0 here so callers can use it as an index).
func FNVHash64(v int64) int64 {
	h := uint64(fnvOffsetBasis64)
	for range 8 {
		h ^= uint64(v & 0xff)
		v >>= 8 // arithmetic, as Java's >>
		h *= fnvPrime64
	}
	s := int64(h)
	if s < 0 {
		s = -s
	}
	if s < 0 {
		return 0
	}
	return s
}

// AppendKey appends the YCSB key name of record keynum to dst: "user"
// followed by the decimal of FNVHash64(keynum) when hashed, else of keynum,
// left padded with zeros to zeroPadding digits.
func AppendKey(dst []byte, keynum int64, hashed bool, zeroPadding int) []byte {
	if hashed {
		keynum = FNVHash64(keynum)
	}
	var num [20]byte
	digits := strconv.AppendInt(num[:0], keynum, 10)
	dst = append(dst, "user"...)
	for i := len(digits); i < zeroPadding; i++ {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// KeyName returns the key of record keynum as a string (see AppendKey).
func KeyName(keynum int64, hashed bool, zeroPadding int) string {
	return string(AppendKey(nil, keynum, hashed, zeroPadding))
}
