package coord

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// dialAs opens a session under root with credential cred ("" for none)
// and closes it when the test ends.
func dialAs(t *testing.T, addr, root, cred string) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Dial(ctx, Config{Servers: []string{addr}, Root: root, Auth: cred})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestACLs: a session with a credential creates every znode of the layout
// (the root and its parent included) for that identity only; its server,
// report, health, election and map operations work; a session without a
// credential, with a wrong password or another user can neither read nor
// change any of it, and the map is unchanged afterwards.
func TestACLs(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	ctx := ctxFor(t, 60*time.Second)
	parent := root(t)
	r := parent + "/cluster"
	const cred = "tebis:s3cret:with-colon"
	admin := dialAs(t, addr, r, cred)

	if err := admin.CreateMap(ctx, testMap(1)); err != nil {
		t.Fatal(err)
	}
	if err := admin.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	join := JoinReport{Region: 1, Epoch: 1, Server: "rs2"}
	if err := admin.Report(ctx, join); err != nil {
		t.Fatal(err)
	}
	if err := admin.SetHealth(ctx, "rs1", &Health{Name: "rs1", Started: 1, State: HealthNoSpace}); err != nil {
		t.Fatal(err)
	}
	l, err := admin.Campaign(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign()
	_, v, err := admin.ReadMap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteMap(ctx, testMap(2), v); err != nil {
		t.Fatal(err)
	}
	if live, err := admin.Servers(ctx); err != nil || len(live) != 1 {
		t.Fatalf("servers: %v, %v; want rs1", live, err)
	}
	if h, err := admin.HealthReports(ctx); err != nil || len(h) != 1 {
		t.Fatalf("health reports: %v, %v; want rs1's", h, err)
	}
	if name, err := admin.Leader(ctx); err != nil || name != "m1" {
		t.Fatalf("leader %q, %v; want m1", name, err)
	}
	if err := admin.Drain(ctx, "rs2"); err != nil {
		t.Fatal(err)
	}
	if rq, err := admin.Requests(ctx); err != nil || !rq.Drained["rs2"] {
		t.Fatalf("requests %+v, %v; want rs2 drained", rq, err)
	}

	actx, stopAnnounce := context.WithCancel(ctx)
	announced := make(chan struct{})
	go func() { defer close(announced); admin.Announce(actx, MasterInfo{Name: "m1", HTTP: "127.0.0.1:1"}) }()
	defer func() { stopAnnounce(); <-announced }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ms, err := admin.Masters(ctx); err == nil && len(ms) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the master's announcement never appeared")
		}
	}

	cands, _, err := admin.Conn().Children(r + "/election")
	if err != nil || len(cands) != 1 {
		t.Fatalf("candidates %v, %v; want one", cands, err)
	}
	want := zk.DigestACL(zk.PermAll, "tebis", "s3cret:with-colon")
	for _, p := range []string{parent, r, r + "/map", r + "/servers", r + "/servers/rs1", r + "/reports", r + "/reports/" + join.znode(),
		r + "/health", r + "/health/rs1", r + "/election", r + "/election/" + cands[0], r + "/admin", r + "/admin/" + drainZnode("rs2"),
		r + "/masters", r + "/masters/m1"} {
		acl, _, err := admin.Conn().GetACL(p)
		if err != nil {
			t.Fatalf("acl of %s: %v", p, err)
		}
		if !slices.Equal(acl, want) {
			t.Errorf("acl of %s is %v, want %v", p, acl, want)
		}
	}

	before, st, err := admin.Conn().Get(r + "/map")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, cred string }{{"no credential", ""}, {"wrong password", "tebis:wrong"}, {"other user", "other:s3cret:with-colon"}} {
		t.Run(c.name, func(t *testing.T) {
			in := dialAs(t, addr, r, c.cred)
			noAuth := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, zk.ErrNoAuth) {
					t.Errorf("%s: %v, want %v", what, err, zk.ErrNoAuth)
				}
			}
			// refused: a Session method's refusal is ErrAuth too.
			refused := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, zk.ErrNoAuth) || !errors.Is(err, ErrAuth) {
					t.Errorf("%s: %v, want %v and %v", what, err, ErrAuth, zk.ErrNoAuth)
				}
			}
			_, err := in.Conn().Set(r+"/map", []byte(`{"version":99}`), -1)
			noAuth("set the map", err)
			noAuth("delete the map", in.Conn().Delete(r+"/map", -1))
			_, err = in.Conn().SetACL(r+"/map", zk.WorldACL(zk.PermAll), -1)
			noAuth("set the map's acl", err)
			_, _, err = in.ReadMap(ctx)
			refused("read the map", err)
			refused("create a map", in.CreateMap(ctx, testMap(7)))
			refused("register", in.Register(ctx, server("rs9")))
			refused("report", in.Report(ctx, JoinReport{Region: 1, Epoch: 1, Server: "rs9"}))
			noAuth("delete a report", in.Conn().Delete(r+"/reports/"+join.znode(), -1))
			noAuth("delete a server", in.Conn().Delete(r+"/servers/rs1", -1))
			refused("set health", in.SetHealth(ctx, "rs9", &Health{Name: "rs9", State: HealthFailed}))
			noAuth("delete a health report", in.Conn().Delete(r+"/health/rs1", -1))
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err = in.Campaign(cctx, "intruder")
			refused("campaign", err)
			noAuth("delete the root", in.Conn().Delete(r, -1))
			refused("request a drain", in.Drain(ctx, "rs1"))
			refused("undrain", in.Undrain(ctx, "rs2"))
			_, err = in.Requests(ctx)
			refused("read the requests", err)
		})
	}
	after, st2, err := admin.Conn().Get(r + "/map")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, before) || st2.Version != st.Version {
		t.Fatalf("the map changed: version %d -> %d\n%s\n->\n%s", st.Version, st2.Version, before, after)
	}
	if live, err := admin.Servers(ctx); err != nil || len(live) != 1 {
		t.Fatalf("servers after: %v, %v; want rs1 only", live, err)
	}
}

// TestNoCredentialWorldACL: without a credential, znodes are open to
// anyone, as before ACLs existed.
func TestNoCredentialWorldACL(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	ctx := ctxFor(t, 30*time.Second)
	s := dialAs(t, addr, root(t), "")
	if err := s.CreateMap(ctx, testMap(1)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.Root(), s.path("map")} {
		acl, _, err := s.Conn().GetACL(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(acl, zk.WorldACL(zk.PermAll)) {
			t.Errorf("acl of %s is %v, want world", p, acl)
		}
	}
}

func TestReadAuthFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, content, want string
		bad                 bool
	}{
		{name: "plain", content: "tebis:pw", want: "tebis:pw"},
		{name: "newline", content: "  tebis:pw\n", want: "tebis:pw"},
		{name: "colon in password", content: "u:a:b\n", want: "u:a:b"},
		{name: "empty", content: "", bad: true},
		{name: "no colon", content: "tebis\n", bad: true},
		{name: "no user", content: ":pw\n", bad: true},
		{name: "no password", content: "tebis:\n", bad: true},
		{name: "two lines", content: "a:b\nc:d\n", bad: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name)
			if err := os.WriteFile(p, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadAuthFile(p)
			if c.bad {
				if !errors.Is(err, ErrAuth) {
					t.Fatalf("got %q, %v; want %v", got, err, ErrAuth)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if _, err := ReadAuthFile(filepath.Join(dir, "missing")); !errors.Is(err, ErrAuth) {
		t.Fatalf("a missing file: %v, want %v", err, ErrAuth)
	}
}

func TestDialBadCredential(t *testing.T) {
	_, err := Dial(context.Background(), Config{Servers: []string{"127.0.0.1:1"}, Auth: "nocolon"})
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("dial with a malformed credential: %v, want %v", err, ErrAuth)
	}
}

// TestSetTreeACL: a layout created without a credential is closed by
// SetTreeACL of a session with one; others then cannot change the map.
func TestSetTreeACL(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	ctx := ctxFor(t, 30*time.Second)
	r := root(t)
	open := dialAs(t, addr, r, "")
	if err := open.CreateMap(ctx, testMap(1)); err != nil {
		t.Fatal(err)
	}
	if err := open.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	if err := open.Report(ctx, JoinReport{Region: 1, Epoch: 1, Server: "rs2"}); err != nil {
		t.Fatal(err)
	}
	admin := dialAs(t, addr, r, "tebis:pw")
	n, err := admin.SetTreeACL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 { // root, map, servers, servers/rs1, reports, its report
		t.Errorf("set %d acls, want 6", n)
	}
	if _, err := open.Conn().Set(r+"/map", []byte("{}"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("set the map without the credential: %v, want %v", err, zk.ErrNoAuth)
	}
	if err := open.Report(ctx, JoinReport{Region: 1, Epoch: 1, Server: "rs3"}); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("report without the credential: %v, want %v", err, zk.ErrNoAuth)
	}
	if _, _, err := admin.ReadMap(ctx); err != nil {
		t.Fatalf("read the map with the credential: %v", err)
	}
	other := dialAs(t, addr, r, "other:pw")
	if _, err := other.SetTreeACL(ctx); !errors.Is(err, zk.ErrNoAuth) || !errors.Is(err, ErrAuth) {
		t.Fatalf("another identity's SetTreeACL: %v, want %v", err, zk.ErrNoAuth)
	}
}
