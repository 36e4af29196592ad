package region

import (
	"testing"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/wire"
)

// TestCheckKeyAdmitsWithoutAllocating: a key that passes costs the
// request path no allocation; each refusal still carries its status.
func TestCheckKeyAdmitsWithoutAllocating(t *testing.T) {
	s := &Server{}
	s.cfg.MaxKeySize = 16
	mr := &regionmap.Assignment{Start: "b", End: "m"}
	key := []byte("key")
	if rej := s.checkKey(mr, key); rej != nil {
		t.Fatalf("a key inside the region refused: %+v", rej)
	}
	if n := testing.AllocsPerRun(1000, func() { _ = s.checkKey(mr, key) }); n != 0 {
		t.Fatalf("%v allocations to admit a key, want 0", n)
	}
	for _, c := range []struct {
		key  string
		want uint16
	}{{"", wire.StatusBadRequest}, {"kkkkkkkkkkkkkkkkk", wire.StatusTooLarge}} {
		if rej := s.checkKey(mr, []byte(c.key)); rej == nil || rej.Status != c.want {
			t.Errorf("key %q: %+v, want status %d", c.key, rej, c.want)
		}
	}
}
