package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoCgroup: the memory limit needs a writable memory cgroup (v1 or v2)
// and the rights to create one under this process's.
var ErrNoCgroup = errors.New("bench: no writable memory cgroup")

// memCgroup confines processes' memory, page cache included, as the
// paper's evaluation does (its buffer cache limited to a quarter of the
// data set with cgroups): reads of what no longer fits go to the device,
// where /proc/PID/io counts them.
type memCgroup struct{ dir string }

// newMemCgroup creates cgroup name, limited to limit bytes, under this
// process's memory cgroup.
func newMemCgroup(name string, limit int64) (*memCgroup, error) {
	parent, file, err := ownMemCgroup("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("%w: set %s: %v", ErrNoCgroup, file, err)
	}
	return &memCgroup{dir: dir}, nil
}

// ownMemCgroup returns the directory of this process's memory cgroup and
// the name of its limit file: cgroup v1's memory hierarchy if mounted,
// else v2's unified one (whose memory controller must be enabled for
// children).
func ownMemCgroup(self string) (dir, limitFile string, err error) {
	f, err := os.Open(self)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	defer f.Close()
	var v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			d := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			if _, err := os.Stat(filepath.Join(d, "memory.limit_in_bytes")); err == nil {
				return d, "memory.limit_in_bytes", nil
			}
		}
	}
	if v2 != "" {
		for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			d := filepath.Join(root, v2)
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.subtree_control")); err == nil && strings.Contains(string(b), "memory") {
				return d, "memory.max", nil
			}
		}
	}
	return "", "", fmt.Errorf("%w: no memory controller for this process", ErrNoCgroup)
}

// add moves process pid into the cgroup (memory it faults in from now on
// is charged to it).
func (c *memCgroup) add(pid int) error {
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("%w: add process %d: %v", ErrNoCgroup, pid, err)
	}
	return nil
}

// remove deletes the cgroup once its processes exited.
func (c *memCgroup) remove() error { return os.Remove(c.dir) }

// peak is the cgroup's peak memory charge in bytes (cgroup v2
// memory.peak, v1 memory.max_usage_in_bytes), 0 if the kernel reports
// neither.
func (c *memCgroup) peak() uint64 {
	for _, f := range []string{"memory.peak", "memory.max_usage_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(c.dir, f))
		if err != nil {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	}
	return 0
}
