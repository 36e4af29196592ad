package procstat

import (
	"net"
	"os"
	"testing"
)

func TestSelf(t *testing.T) {
	cpu, err := CPU(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Fatalf("cpu %v %v", cpu, err)
	}
	if _, err := ReadIO(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pid, err := ListenerPID(l.Addr().String())
	if err != nil || pid != os.Getpid() {
		t.Fatalf("listener pid %d (self %d): %v", pid, os.Getpid(), err)
	}
	l.Close()
	if _, err := ListenerPID(l.Addr().String()); err == nil {
		t.Fatal("found a listener on a closed port")
	}
}

func TestPeakRSS(t *testing.T) {
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = 1
	}
	n, err := PeakRSS(os.Getpid())
	if err != nil || n < 64<<20 {
		t.Fatalf("peak rss %d %v, want at least the 64 MiB touched", n, err)
	}
	_ = big[len(big)-1]
	if n, err := parseHWM([]byte("Name:\tx\nVmHWM:\t   1234 kB\nVmRSS:\t1 kB\n")); err != nil || n != 1234<<10 {
		t.Fatalf("parse: %d %v", n, err)
	}
	if _, err := parseHWM([]byte("Name:\tx\n")); err == nil {
		t.Fatal("status without VmHWM parsed")
	}
}
