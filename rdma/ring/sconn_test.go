package ring

import "testing"

// TestRequestBufferPoolAllocatesNothing: taking a request's payload
// buffer and returning it, as every request on the ring does, costs no
// allocation once the pool holds one.
func TestRequestBufferPoolAllocatesNothing(t *testing.T) {
	putBuf(getBuf(100))
	if n := testing.AllocsPerRun(1000, func() { putBuf(getBuf(100)) }); n != 0 {
		t.Fatalf("%v allocations per request buffer, want 0", n)
	}
}
