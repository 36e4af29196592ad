package ring

import "errors"

var (
	// ErrTooLarge: a request or reply does not fit in half a ring.
	ErrTooLarge = errors.New("ring: message too large")
	// ErrMalformed: a header or message breaks the protocol.
	ErrMalformed = errors.New("ring: malformed message")
	// ErrClosed: the client or server was closed, or the connection broke.
	ErrClosed = errors.New("ring: connection closed")
	// ErrStatus: the server answered with a protocol-level error status.
	ErrStatus = errors.New("ring: error reply")
)
