package client

import (
	"errors"
	"fmt"

	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

var (
	// ErrNotFound: no value under the key.
	ErrNotFound = errors.New("client: key not found")
	// ErrTooLarge: a key, value or reply over the server's or the ring's
	// limit.
	ErrTooLarge = errors.New("client: too large")
	// ErrBadRequest: the server refused the request as invalid (an empty
	// key, say).
	ErrBadRequest = errors.New("client: bad request")
	// ErrWrongRegion: the servers kept redirecting after every map refresh
	// the retry budget allowed.
	ErrWrongRegion = errors.New("client: wrong region after retries")
	// ErrUnavailable: the server is shutting down or cannot serve the
	// region; retry later.
	ErrUnavailable = errors.New("client: server unavailable")
	// ErrStorage: the server's disk is full or failing and cannot store
	// the write (nothing was acknowledged). It comes wrapped with
	// ErrUnavailable: the write is retried like one, and once the master
	// moved the region to a healthy server the retry goes there. The
	// message names the server and its disk's error.
	ErrStorage = errors.New("client: server storage full or failing")
	// ErrServer: the server failed internally.
	ErrServer = errors.New("client: server error")
	// ErrZooKeeperAuth: the ZooKeeper credential (ZooKeeperAuth) is
	// malformed, or missing or wrong for a cluster whose znodes have one.
	ErrZooKeeperAuth = coord.ErrAuth
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client: closed")
)

// statusErr turns a non-OK reply into an error. An OK or NOT_FOUND
// reply costs nothing: only an error's message copies the payload.
func statusErr(rep ring.Reply) error {
	switch rep.Status {
	case ring.StatusOK:
		return nil
	case wire.StatusNotFound:
		return ErrNotFound
	case wire.StatusTooLarge:
		return fmt.Errorf("%w: %s", ErrTooLarge, rep.Payload)
	case wire.StatusBadRequest:
		return fmt.Errorf("%w: %s", ErrBadRequest, rep.Payload)
	case wire.StatusUnavailable:
		return fmt.Errorf("%w: %s", ErrUnavailable, rep.Payload)
	case wire.StatusStorage:
		return fmt.Errorf("%w: %w: %s", ErrUnavailable, ErrStorage, rep.Payload)
	case wire.StatusInternal:
		return fmt.Errorf("%w: %s", ErrServer, rep.Payload)
	}
	return fmt.Errorf("%w: status %d %s", ErrServer, rep.Status, rep.Payload)
}
