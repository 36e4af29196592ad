package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// TestStatusErr: every status maps to its sentinel with the server's
// message, and an OK reply (a get's value) or NOT_FOUND allocates nothing.
func TestStatusErr(t *testing.T) {
	for _, c := range []struct {
		status uint16
		want   []error
	}{
		{ring.StatusOK, nil},
		{wire.StatusNotFound, []error{ErrNotFound}},
		{wire.StatusTooLarge, []error{ErrTooLarge}},
		{wire.StatusBadRequest, []error{ErrBadRequest}},
		{wire.StatusUnavailable, []error{ErrUnavailable}},
		{wire.StatusStorage, []error{ErrUnavailable, ErrStorage}},
		{wire.StatusInternal, []error{ErrServer}},
		{999, []error{ErrServer}},
	} {
		err := statusErr(ring.Reply{Status: c.status, Payload: []byte("why")})
		if (err == nil) != (c.want == nil) {
			t.Fatalf("status %d: %v, want %v", c.status, err, c.want)
		}
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("status %d: %v, want it to wrap %v", c.status, err, w)
			}
		}
		if len(c.want) > 0 && c.want[0] != ErrNotFound && !strings.Contains(err.Error(), "why") {
			t.Errorf("status %d: %q lacks the server's message", c.status, err)
		}
	}
	value := make([]byte, 1000)
	for _, status := range []uint16{ring.StatusOK, wire.StatusNotFound} {
		if n := testing.AllocsPerRun(100, func() { _ = statusErr(ring.Reply{Status: status, Payload: value}) }); n != 0 {
			t.Errorf("status %d: %v allocations, want 0", status, n)
		}
	}
}
