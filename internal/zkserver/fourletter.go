package zkserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// ErrNotServing reports that a server answered srvr without a Mode: it is
// up but not (yet, or no longer) serving, e.g. an ensemble member without
// a quorum.
var ErrNotServing = errors.New("zookeeper is not serving requests")

// Mode asks the server for its role with the srvr four-letter command:
// "standalone", "leader" or "follower" (or "observer"). Without a
// deadline on ctx it waits at most 2 s.
func (s *Server) Mode(ctx context.Context) (string, error) {
	out, err := FourLetter(ctx, s.Addr(), "srvr")
	if err != nil {
		return "", err
	}
	return parseMode(out)
}

// FourLetter sends a four-letter command (srvr, stat, mntr, ...) to the
// server at addr and returns its whole answer. Without a deadline on ctx
// it waits at most 2 s.
func FourLetter(ctx context.Context, addr, cmd string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zkserver: %s: %w", cmd, err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", fmt.Errorf("zkserver: %s to %s: %w", cmd, addr, err)
	}
	b, err := io.ReadAll(io.LimitReader(c, 1<<20)) // the server closes after answering
	if err != nil {
		return "", fmt.Errorf("zkserver: %s to %s: %w", cmd, addr, err)
	}
	return string(b), nil
}

// parseMode finds the "Mode: x" line of a srvr answer.
func parseMode(out string) (string, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode:"); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	return "", fmt.Errorf("zkserver: %w: %q", ErrNotServing, first)
}
