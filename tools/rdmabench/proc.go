package rdmabench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/internal/procstat"
)

// peerProc is a running peer process.
type peerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

// startPeer starts `argv... --mode M --transport T --addr A` and waits for
// its ready line.
func startPeer(argv []string, mode, transport, addr string) (*peerProc, error) {
	args := append(append([]string(nil), argv[1:]...), "--mode", mode, "--transport", transport, "--addr", addr)
	cmd := exec.Command(argv[0], args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rdmabench: start peer: %w", err)
	}
	p := &peerProc{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout)
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
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// cpu is the peer's CPU time so far, summed over its threads.
func (p *peerProc) cpu() (time.Duration, error) { return procstat.CPU(p.cmd.Process.Pid) }

// selfCPU is this process's user+sys CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
