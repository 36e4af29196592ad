package ycsb

import "testing"

func TestFNVHash64MatchesYCSB(t *testing.T) {
	// Values from Java's Utils.fnvhash64.
	for _, c := range []struct{ in, want int64 }{
		{0, 6284781860667377211},
		{1, 8517097267634966620},
		{2, 1820151046732198393},
		{12345, 1792800413050876852},
	} {
		if got := FNVHash64(c.in); got != c.want {
			t.Errorf("FNVHash64(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestKeyFormat(t *testing.T) {
	for _, c := range []struct {
		n      int64
		hashed bool
		pad    int
		want   string
	}{
		{0, true, 1, "user6284781860667377211"},
		{42, false, 1, "user42"},
		{42, false, 5, "user00042"},
		{1, true, 25, "user000000" + "8517097267634966620"},
	} {
		if got := KeyName(c.n, c.hashed, c.pad); got != c.want {
			t.Errorf("KeyName(%d, %v, %d) = %q, want %q", c.n, c.hashed, c.pad, got, c.want)
		}
	}
	if got := AppendKey([]byte("x"), 42, false, 1); string(got) != "xuser42" {
		t.Errorf("AppendKey appended %q", got)
	}
}

func TestAppendKeyDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendKey(buf[:0], 12345, true, 1) }); n != 0 {
		t.Errorf("AppendKey allocates %v times per call", n)
	}
}
