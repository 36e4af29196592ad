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
