//go:build mips || mips64 || ppc64 || s390x

package rdma

import "math/bits"

// leWord converts between a native word and its little-endian value.
func leWord(w uint64) uint64 { return bits.ReverseBytes64(w) }
