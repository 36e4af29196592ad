// Package procstat reads another process's resource use from /proc: CPU
// time summed over its threads (schedstat, nanoseconds) and the bytes its
// read/write system calls moved (io). Linux only; errors elsewhere.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
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

// ListenerPID finds the local process listening on a TCP address
// (host:port) through /proc/net/tcp{,6} and the processes' socket
// descriptors. It fails for sockets this user cannot see.
func ListenerPID(addr string) (int, error) {
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("procstat: port %q: %w", portStr, err)
	}
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && p == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("procstat: nothing listens on %s", addr)
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			pid, err := strconv.Atoi(strings.Split(fd, "/")[2])
			if err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("procstat: no visible process owns the listener on %s", addr)
}

// PeakRSS is pid's peak resident set size in bytes (VmHWM of
// /proc/PID/status: the most memory it had resident at once since it
// started).
func PeakRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	return parseHWM(b)
}

// parseHWM finds the VmHWM line of a /proc/PID/status (kB).
func parseHWM(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "VmHWM" {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("procstat: VmHWM %q", val)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procstat: VmHWM: %w", err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("procstat: no VmHWM in status")
}
