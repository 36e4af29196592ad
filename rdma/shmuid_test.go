package rdma

import "testing"

func TestUIDAllowed(t *testing.T) {
	const self = 1000
	cases := []struct {
		uid     uint32
		allowed []uint32
		want    bool
	}{
		{self, nil, true},
		{0, nil, true},
		{1001, nil, false},
		{1001, []uint32{1001, 1002}, true},
		{self, []uint32{1001}, false},
		{0, []uint32{1001}, false},
		{self, []uint32{}, false},
	}
	for _, c := range cases {
		if got := uidAllowed(c.uid, c.allowed, self); got != c.want {
			t.Errorf("uidAllowed(%d, %v, self %d) = %v, want %v", c.uid, c.allowed, self, got, c.want)
		}
	}
}
