package rdmabench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/internal/child"
	"github.com/tebis-go/tebis/internal/procstat"
)

// peerProc is a running peer process.
type peerProc struct {
	proc  *child.Process
	stdin *os.File // closing it asks the peer to exit
	addr  string
}

// startPeer starts `argv... --mode M --transport T --addr A` and waits for
// its ready line.
func startPeer(argv []string, mode, transport, addr string) (*peerProc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("rdmabench: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("rdmabench: %w", err)
	}
	args := append(append(slices.Clone(argv), "--mode", mode), "--transport", transport, "--addr", addr)
	proc, err := child.Start(child.Spec{Argv: args, Stdin: inR, Stdout: outW, Stderr: os.Stderr})
	inR.Close() // the peer has its own descriptors
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("rdmabench: peer: %w", err)
	}
	p := &peerProc{proc: proc, stdin: inW}
	line := make(chan string, 1)
	go func() {
		defer outR.Close()
		s, _ := bufio.NewReader(outR).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, outR)
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, "ready ") {
			p.stop()
			return nil, fmt.Errorf("rdmabench: peer said %q, want a ready line", s)
		}
		p.addr = strings.TrimSpace(strings.TrimPrefix(s, "ready "))
	case <-time.After(20 * time.Second):
		p.stop()
		return nil, fmt.Errorf("rdmabench: peer not ready within 20s")
	}
	return p, nil
}

// stop closes the peer's stdin, waits a moment, then kills it.
func (p *peerProc) stop() {
	p.stdin.Close()
	_ = p.proc.Stop(0, 3*time.Second)
}

// cpu is the peer's CPU time so far, summed over its threads.
func (p *peerProc) cpu() (time.Duration, error) { return procstat.CPU(p.proc.PID()) }

// selfCPU is this process's user+sys CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
