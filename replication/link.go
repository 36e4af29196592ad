package replication

import (
	"context"

	"github.com/tebis-go/tebis/internal/replwire"
)

// LocalLink delivers commands to a Replica in the same process, through
// the wire encoding (the in-memory twin of the region server's link).
type LocalLink struct {
	Replica *Replica
	// Fail, if set, is consulted before each command; an error it returns
	// is the send's (fault injection).
	Fail func(*Command) error
}

// Send encodes c, decodes it and hands it to the replica.
func (l *LocalLink) Send(ctx context.Context, c *Command) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l.Fail != nil {
		if err := l.Fail(c); err != nil {
			return nil, err
		}
	}
	d, err := replwire.DecodeCommand(c.Encode(nil))
	if err != nil {
		return nil, err
	}
	return l.Replica.Reply(d)
}
