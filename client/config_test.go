package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
)

// TestOpenRejectsSpinTime: a negative SpinTime or one over a second is a
// configuration error, not a poller that never parks.
func TestOpenRejectsSpinTime(t *testing.T) {
	m := regionmap.Single(regionmap.Server{Name: "s", TCP: "127.0.0.1:1"})
	for _, d := range []time.Duration{-time.Microsecond, time.Second + time.Nanosecond} {
		_, err := Open(context.Background(), Config{Map: regionmap.Static{M: m}, SpinTime: d})
		if err == nil {
			t.Fatalf("SpinTime %v accepted", d)
		}
		if errors.Is(err, context.Canceled) {
			t.Fatalf("SpinTime %v: %v, want a configuration error", d, err)
		}
	}
	cl, err := Open(context.Background(), Config{Map: regionmap.Static{M: m}, SpinTime: time.Microsecond})
	if err != nil {
		t.Fatalf("SpinTime 1µs: %v", err)
	}
	cl.Close()
}
