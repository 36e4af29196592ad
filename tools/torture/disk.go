package torture

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tebis-go/tebis/region"
)

// Disk faults. A region server's volume lives in volumes/NAME/data. For
// the disk-full nemesis (root only) volumes/NAME is a tmpfs of its own,
// filled by a file beside data/ (filler) until the volume cannot grow;
// removing the file gives the space back. For disk-error the servers run
// with --fault-fs, and the nemesis writes the failure mode into
// data/FAULT (region.FaultFile).

// tmpfsSize caps each server's tmpfs (memory is used only as it fills).
const tmpfsSize = "8g"

// fillLeave is the free space a filled tmpfs keeps: below the servers'
// space reserve (16 MiB: the segment file cannot grow), above nothing
// (the metadata store still has room, as the reserve intends).
const fillLeave = 8 << 20

// volumeDir is server name's volume directory under dir.
func volumeDir(dir, name string) string { return filepath.Join(dir, "volumes", name, "data") }

// mountTmpfs makes dir a tmpfs mount.
func mountTmpfs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+tmpfsSize); err != nil {
		return fmt.Errorf("torture: mount a tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmountUnder unmounts every mount at or below dir (a run's own, or one
// a killed run left).
func unmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil // no mount table: nothing we mounted either
	}
	var first error
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- { // the deepest (latest) first
		f := strings.Fields(lines[i])
		if len(f) < 2 || (f[1] != abs && !strings.HasPrefix(f[1], abs+"/")) {
			continue
		}
		if err := unix.Unmount(f[1], unix.MNT_DETACH); err != nil && first == nil {
			first = fmt.Errorf("torture: unmount %s: %w", f[1], err)
		}
	}
	return first
}

// fill takes all but fillLeave of the free space of server name's tmpfs.
// The server may grow its segment file while a large fallocate runs (on a
// tmpfs it allocates every page): the fallocate then fails for want of
// space, leaving nothing allocated, and fill measures again and retries,
// a bounded number of times.
func fill(dir, name string) error {
	mnt := filepath.Join(dir, "volumes", name)
	f, err := os.OpenFile(filepath.Join(mnt, "filler"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	defer f.Close()
	const attempts = 5
	for i := 1; ; i++ {
		var st unix.Statfs_t
		if err := unix.Statfs(mnt, &st); err != nil {
			return fmt.Errorf("torture: statfs %s: %w", mnt, err)
		}
		n := int64(st.Bavail)*st.Bsize - fillLeave
		if n <= 0 {
			return nil
		}
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("torture: %w", err)
		}
		err = unix.Fallocate(int(f.Fd()), 0, fi.Size(), n)
		if err == nil {
			return nil
		}
		if err != unix.ENOSPC || i == attempts {
			return fmt.Errorf("torture: filling %s (attempt %d): %w", mnt, i, err)
		}
	}
}

// unfill gives server name's tmpfs its space back.
func unfill(dir, name string) error {
	err := os.Remove(filepath.Join(dir, "volumes", name, "filler"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("torture: %w", err)
	}
	return nil
}

// setFault writes mode into server name's fault-fs control file ("off"
// removes it).
func setFault(dir, name, mode string) error {
	p := filepath.Join(volumeDir(dir, name), region.FaultFile)
	if mode == "off" {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("torture: %w", err)
		}
		return nil
	}
	if err := os.WriteFile(p, []byte(mode+"\n"), 0o644); err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	return nil
}
