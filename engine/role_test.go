package engine

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestRoleMethodSets pins the exported method sets of the two role
// handles: a Backup has no write, compaction or replication-source API
// and a Region no backup API, so that calling the wrong one does not
// compile. A method added to either type must be placed here, in its role.
func TestRoleMethodSets(t *testing.T) {
	shared := []string{"Desc", "Get", "Levels", "LogRecoveryPoint", "LogSegments", "Scan", "Stats", "TryGet", "TryGetInto"}
	primary := []string{
		"ApplyDelete", "ApplyLogRecord", "ApplyPut", "CommitApplied", "Compact", "Delete", "DeleteOnce",
		"GC", "InstallLevel", "LogTail", "MergeRequestTable", "Put", "PutOnce", "Quiesce", "ReadIndexSegment",
		"ReadLog", "RecoveryPoint", "ReplaceReplicator", "RequestTableChunks", "RequestTableLen",
		"ResetRequestTable", "Resume", "ScanUnreplicated", "SetListener", "SetReplicator", "Snapshot", "Sync",
		"SyncTo", "Synced", "TryPutOnce", "WaitIdle", "WritesWait",
	}
	backup := []string{"AdoptLog", "AdoptedLog", "ApplyCompaction", "DropLog", "LogMap", "RebaseLog", "ResetBackup"}
	methods := func(v any) []string {
		typ := reflect.TypeOf(v)
		var out []string
		for i := range typ.NumMethod() {
			out = append(out, typ.Method(i).Name)
		}
		return out
	}
	want := func(sets ...[]string) []string {
		out := slices.Concat(sets...)
		slices.Sort(out)
		return out
	}
	if got, w := methods((*Region)(nil)), want(shared, primary); !slices.Equal(got, w) {
		t.Errorf("*Region methods:\n got %v\nwant %v", got, w)
	}
	if got, w := methods((*Backup)(nil)), want(shared, backup); !slices.Equal(got, w) {
		t.Errorf("*Backup methods:\n got %v\nwant %v", got, w)
	}
}

// TestRoleChangeHandles: a demotion returns a working Backup and a
// promotion a working Region; the volume's lookups follow the role; the
// handle of the old role refuses every call with ErrClosed; lookups and
// role changes that find the other role refuse with ErrBackupRegion.
func TestRoleChangeHandles(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	pr := mustRegion(t, v, 1)
	if err := pr.Put(key(1), []byte("v")); err != nil {
		t.Fatal(err)
	}
	lookups := func(what string, wantPrimary, wantBackup any) {
		t.Helper()
		r, okR := v.Region(1)
		b, okB := v.Backup(1)
		if okR != (wantPrimary != nil) || okB != (wantBackup != nil) ||
			(okR && r != wantPrimary) || (okB && b != wantBackup) {
			t.Fatalf("%s: Region %v (%p), Backup %v (%p)", what, okR, r, okB, b)
		}
	}
	lookups("primary", pr, nil)
	if _, err := v.PromoteBackup(1, 2, nil); !errors.Is(err, ErrBackupRegion) {
		t.Fatalf("promotion of a primary: %v", err)
	}

	br, err := v.DemoteRegion(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	lookups("demoted", nil, br)
	if err := pr.Put(key(2), []byte("v")); !errors.Is(err, ErrClosed) {
		t.Fatalf("put on the demoted primary's handle: %v", err)
	}
	if _, err := pr.Get(key(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("get on the demoted primary's handle: %v", err)
	}
	if _, err := br.Get(key(1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get on the empty backup: %v", err)
	}
	if _, _, err := v.OpenRegion(RegionDesc{ID: 1}); !errors.Is(err, ErrBackupRegion) {
		t.Fatalf("OpenRegion of a backup: %v", err)
	}
	if err := v.SetFollower(1, true); !errors.Is(err, ErrBackupRegion) {
		t.Fatalf("SetFollower of a backup: %v", err)
	}
	if copied, err := v.IsCopy(1); err != nil || !copied {
		t.Fatalf("IsCopy of a backup: %v, %v", copied, err)
	}
	if _, err := v.DemoteRegion(1, 3); !errors.Is(err, ErrBackupRegion) {
		t.Fatalf("demotion of a backup: %v", err)
	}
	if err := br.ResetBackup(); err != nil {
		t.Fatalf("reset of the backup: %v", err)
	}

	nr, err := v.PromoteBackup(1, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	lookups("promoted", nr, nil)
	if err := br.ResetBackup(); !errors.Is(err, ErrClosed) {
		t.Fatalf("reset on the promoted backup's handle: %v", err)
	}
	if err := br.DropLog(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("drop on the promoted backup's handle: %v", err)
	}
	if err := nr.Put(key(3), []byte("w")); err != nil {
		t.Fatalf("put on the promoted region: %v", err)
	}
	if got, err := nr.Get(key(3)); err != nil || string(got) != "w" {
		t.Fatalf("get on the promoted region: %q, %v", got, err)
	}
	if copied, err := v.IsCopy(1); err != nil || copied {
		t.Fatalf("IsCopy of the promoted region: %v, %v", copied, err)
	}
	if r, created, err := v.OpenRegion(RegionDesc{ID: 1}); err != nil || created || r != nr {
		t.Fatalf("OpenRegion of the promoted region: %p (want %p), created %v, %v", r, nr, created, err)
	}
}
