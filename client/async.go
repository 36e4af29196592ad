package client

import "context"

// Op is an asynchronous operation's request and, once Done is closed, its
// outcome.
type Op struct {
	Kind  OpKind
	Key   []byte
	Value []byte // put: the value; get: the result
	Err   error

	done chan struct{}
}

// OpKind is an asynchronous operation's kind.
type OpKind uint8

// Operation kinds.
const (
	OpGet OpKind = iota + 1
	OpPut
	OpDelete
)

// Done is closed when the operation finished.
func (op *Op) Done() <-chan struct{} { return op.done }

// Wait blocks until the operation finished and returns its error.
func (op *Op) Wait() error {
	<-op.done
	return op.Err
}

// Go starts op and returns at once: any number of operations can be in
// flight over one connection. Operations in flight together are not
// ordered with each other. notify, if not nil, receives op when it
// finishes (it must have room).
func (c *Client) Go(ctx context.Context, op *Op, notify chan<- *Op) *Op {
	op.done = make(chan struct{})
	go func() {
		switch op.Kind {
		case OpGet:
			op.Value, op.Err = c.Get(ctx, op.Key)
		case OpPut:
			op.Err = c.Put(ctx, op.Key, op.Value)
		case OpDelete:
			op.Err = c.Delete(ctx, op.Key)
		default:
			op.Err = ErrBadRequest
		}
		close(op.done)
		if notify != nil {
			notify <- op
		}
	}()
	return op
}
