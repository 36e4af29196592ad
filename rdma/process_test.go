package rdma_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// The helper process: dials the address in TEBIS_RDMA_HELPER_ADDR, writes
// "from child <pid>" into the listener's region with a solicited WRITE, then
// waits to be killed.
func TestMain(m *testing.M) {
	if kind := os.Getenv("TEBIS_RDMA_HELPER"); kind != "" {
		if err := helper(kind, os.Getenv("TEBIS_RDMA_HELPER_ADDR")); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func transportOf(kind string) rdma.Transport {
	if kind == "shm" {
		return &rdma.Shm{}
	}
	return &rdma.TCP{DeadAfter: time.Second}
}

func helper(kind, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mr, err := rdma.Register(4096)
	if err != nil {
		return err
	}
	cq := rdma.NewCQ()
	qp, err := transportOf(kind).Dial(ctx, addr, rdma.ConnConfig{CQ: cq, Expose: []*rdma.MR{mr}})
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("from child %d", os.Getpid())
	n := copy(mr.Bytes(), msg)
	if err := qp.PostWrite(rdma.WriteWR{Local: mr, Len: n, Remote: qp.PeerRegions()[0], Signaled: true, Solicited: true, Imm: 7}); err != nil {
		return err
	}
	var c [1]rdma.Completion
	if _, err := cq.Wait(ctx, c[:]); err != nil || c[0].Err != nil {
		return fmt.Errorf("write completion: %v %v", err, c[0].Err)
	}
	time.Sleep(time.Minute)
	return nil
}

// startHelper accepts a connection from a child process and waits for its
// WRITE (announced by a doorbell).
func startHelper(t *testing.T, kind, addr string) (*exec.Cmd, rdma.QP, *rdma.CQ, *rdma.MR) {
	t.Helper()
	tr := transportOf(kind)
	ln, err := tr.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TEBIS_RDMA_HELPER="+kind, "TEBIS_RDMA_HELPER_ADDR="+ln.Addr())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := rdma.Register(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Deregister() })
	cq := rdma.NewCQ()
	qp, err := req.Accept(rdma.ConnConfig{CQ: cq, Expose: []*rdma.MR{mr}})
	if err != nil {
		t.Fatal(err)
	}
	qp.ReqNotify()
	want := fmt.Sprintf("from child %d", cmd.Process.Pid)
	for string(mr.Bytes()[:len(want)]) != want {
		var c [1]rdma.Completion
		if _, err := cq.Wait(ctx, c[:]); err != nil {
			t.Fatalf("child's WRITE never arrived: %v (region holds %q)", err, mr.Bytes()[:len(want)])
		}
		if c[0].Op != rdma.OpDoorbell || c[0].Imm != 7 {
			t.Fatalf("unexpected completion %+v", c[0])
		}
	}
	return cmd, qp, cq, mr
}

func waitDisconnect(t *testing.T, cq *rdma.CQ, within time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), within+5*time.Second)
	defer cancel()
	for {
		var c [1]rdma.Completion
		if _, err := cq.Wait(ctx, c[:]); err != nil {
			t.Fatalf("no disconnect: %v", err)
		}
		if c[0].Op == rdma.OpDisconnect {
			if !errors.Is(c[0].Err, rdma.ErrPeerLost) {
				t.Fatalf("disconnect error %v, want ErrPeerLost (a death, not a close)", c[0].Err)
			}
			break
		}
	}
	if d := time.Since(start); d > within {
		t.Fatalf("peer death took %v to show, bound %v", d, within)
	}
}

func TestProcessPeerKilled(t *testing.T) {
	for _, kind := range []string{"shm", "tcp"} {
		t.Run(kind, func(t *testing.T) {
			addr := net.JoinHostPort("127.0.0.1", "0")
			if kind == "shm" {
				addr = filepath.Join(t.TempDir(), "s")
			}
			cmd, qp, cq, mr := startHelper(t, kind, addr)
			// A pending signaled WRITE into the child, then kill -9.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			waitDisconnect(t, cq, 2*time.Second)
			if err := qp.PostWrite(rdma.WriteWR{Local: mr, Len: 8, Remote: qp.PeerRegions()[0], Signaled: true}); err == nil {
				t.Fatal("post to a dead peer succeeded")
			}
		})
	}
}

// TestTCPPeerFrozen: a stopped (not dead) peer stops answering; the QP
// breaks within DeadAfter plus a ping period, and a pending signaled WRITE
// completes with ErrPeerGone.
func TestTCPPeerFrozen(t *testing.T) {
	cmd, qp, cq, mr := startHelper(t, "tcp", "127.0.0.1:0")
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Signal(syscall.SIGCONT)
	// Wait until the child is really stopped (state T).
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "T" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("child did not stop")
		}
		time.Sleep(time.Millisecond)
	}
	// Fill the child's socket buffers so the WRITE stays unacknowledged.
	if err := qp.PostWrite(rdma.WriteWR{ID: 5, Local: mr, Len: 8, Remote: qp.PeerRegions()[0], Signaled: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sawWrite, sawDisc bool
	for !sawWrite || !sawDisc {
		var c [1]rdma.Completion
		if _, err := cq.Wait(ctx, c[:]); err != nil {
			t.Fatalf("write completion %v, disconnect %v: %v", sawWrite, sawDisc, err)
		}
		switch c[0].Op {
		case rdma.OpWrite:
			if c[0].WRID != 5 || !errors.Is(c[0].Err, rdma.ErrPeerGone) {
				t.Fatalf("write completion %+v, want ErrPeerGone", c[0])
			}
			sawWrite = true
		case rdma.OpDisconnect:
			sawDisc = true
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("frozen peer detected after %v", d)
	}
}
