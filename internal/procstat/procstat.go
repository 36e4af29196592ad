// Package procstat reads another process's resource use from /proc: CPU
// time summed over its threads (schedstat, nanoseconds) and the bytes its
// read/write system calls moved (io). Linux only; errors elsewhere.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU sums the on-CPU time of every live thread of pid.
func CPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("procstat: no schedstat for pid %d", pid)
	}
	var total int64
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procstat: %s: %w", path, err)
		}
		total += ns
	}
	return time.Duration(total), nil
}

// IO is what /proc/PID/io reports.
type IO struct {
	RChar, WChar          uint64 // bytes through read/write-like system calls
	ReadBytes, WriteBytes uint64 // bytes the storage layer fetched/sent
}

// ReadIO reads /proc/PID/io.
func ReadIO(pid int) (IO, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return IO{}, fmt.Errorf("procstat: %w", err)
	}
	var io IO
	fields := map[string]*uint64{"rchar": &io.RChar, "wchar": &io.WChar, "read_bytes": &io.ReadBytes, "write_bytes": &io.WriteBytes}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if p, known := fields[name]; ok && known {
			if *p, err = strconv.ParseUint(strings.TrimSpace(val), 10, 64); err != nil {
				return IO{}, fmt.Errorf("procstat: io %s: %w", name, err)
			}
		}
	}
	return io, nil
}
