//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package rdma

// leWord converts between a native word and its little-endian value.
func leWord(w uint64) uint64 { return w }
