package coord

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestAnnounce publishes a master's znode while Announce runs, again after
// its session expired, and deletes it when Announce's ctx ends.
func TestAnnounce(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	p := newProxy(t, addr)
	s, obs := dial(t, p.Addr(), 800*time.Millisecond), dial(t, addr, 0)
	ctx := ctxFor(t, 60*time.Second)
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	want := MasterInfo{Name: "m1", HTTP: "127.0.0.1:9000"}
	go func() { defer close(done); s.Announce(actx, want) }()
	announced := func() bool {
		ms, err := obs.Masters(ctx)
		return err == nil && ms["m1"] == want
	}
	eventually(t, "m1 announced", announced)

	expired := s.Expired()
	p.Cut()
	eventually(t, "the announcement gone with the session", func() bool { return owner(t, obs, obs.path("masters", "m1")) == -1 })
	p.Heal()
	if !closedWithin(expired, 15*time.Second) {
		t.Fatal("Expired did not fire after the partition healed")
	}
	eventually(t, "m1 announced by the next session", announced)

	stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Announce still running 10 s after its ctx ended")
	}
	if ms, err := obs.Masters(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("Masters after Announce ended = %v, %v; want none", ms, err)
	}
}

// TestServerInfoHTTPCompatible: a registration without the HTTP field
// (an older server's) decodes, and one with it is readable as the older
// layout (the field is added, nothing renamed).
func TestServerInfoHTTPCompatible(t *testing.T) {
	var old ServerInfo
	if err := json.Unmarshal([]byte(`{"name":"rs1","tcp":"h:1","started":7}`), &old); err != nil || old.HTTP != "" || old.Started != 7 || old.Name != "rs1" {
		t.Fatalf("older registration decoded as %+v, %v", old, err)
	}
	b, err := json.Marshal(ServerInfo{Server: server("rs1").Server, Started: 7})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["http"]; ok {
		t.Fatalf("a registration without HTTP encodes an http field: %s", b)
	}
	b, _ = json.Marshal(ServerInfo{Server: server("rs1").Server, Started: 7, HTTP: "127.0.0.1:8080"})
	var back ServerInfo
	if err := json.Unmarshal(b, &back); err != nil || back.HTTP != "127.0.0.1:8080" {
		t.Fatalf("round trip of %s = %+v, %v", b, back, err)
	}
}
