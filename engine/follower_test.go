package engine

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFollowerMarkPersists: the follower mark (a Build-Index backup's
// copy) survives a reopen, shows in the inspector, and comes off again; a
// Send-Index backup region is a copy by its role until its promotion.
func TestFollowerMarkPersists(t *testing.T) {
	fs := vfs.NewMem()
	v := mustOpen(t, smallOpts(fs))
	r := mustRegion(t, v, 1)
	if err := r.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := v.CreateBackupRegion(RegionDesc{ID: 2, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	isCopy := func(v *Volume, id uint64) bool {
		t.Helper()
		c, err := v.IsCopy(id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if isCopy(v, 1) || !isCopy(v, 2) {
		t.Fatal("a new ordinary region is a copy, or a backup region is not")
	}
	if _, err := v.IsCopy(9); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("IsCopy of an unknown region: %v", err)
	}
	if err := v.SetFollower(2, true); !errors.Is(err, ErrBackupRegion) {
		t.Fatalf("SetFollower on a backup region: %v, want ErrBackupRegion", err)
	}
	if err := v.SetFollower(1, true); err != nil {
		t.Fatal(err)
	}
	if !isCopy(v, 1) {
		t.Fatal("marked region is no copy")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	in, err := OpenInspector(fs, "vol", false)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[uint64]string{}
	for _, ri := range in.Summary().Regions {
		roles[ri.ID] = ri.Role
	}
	in.Close()
	if roles[1] != "follower" || roles[2] != "backup" {
		t.Fatalf("inspector roles %v, want 1: follower, 2: backup", roles)
	}

	v = mustOpen(t, smallOpts(fs))
	r = mustRegion(t, v, 1)
	if !isCopy(v, 1) {
		t.Fatal("follower mark lost across a reopen")
	}
	if got, err := r.Get([]byte("k")); err != nil || string(got) != "v" {
		t.Fatalf("marked region's data: %q, %v", got, err)
	}
	if err := v.SetFollower(1, false); err != nil {
		t.Fatal(err)
	}
	if isCopy(v, 1) {
		t.Fatal("unmarked region still a copy")
	}
	if _, err := v.PromoteBackup(2, 2, nil); err != nil {
		t.Fatal(err)
	}
	if isCopy(v, 2) {
		t.Fatal("promoted backup region still a copy")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.SetFollower(1, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetFollower after Close: %v, want ErrClosed", err)
	}
	if _, err := v.IsCopy(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("IsCopy after Close: %v, want ErrClosed", err)
	}
}
