// Package ring is Tebis's message protocol over one-sided WRITEs (paper
// §3.4): per connection the client owns two rings, a request ring that
// lives in the server's memory (the client keeps a mirror it writes from)
// and a reply ring in its own memory (the server keeps a mirror it writes
// replies from). Messages are a 64-byte header and a payload padded to a
// multiple of 64 bytes ending in a tail word; the server's spinners poll
// each ring's rendezvous point, hand requests to per-worker queues, and the
// workers WRITE each reply into the slot the client reserved, in any order.
// docs/protocol.md has the byte layout.
//
// Contracts: a Client is safe for concurrent use and keeps many requests
// outstanding; Call blocks until its reply, its context ends or the
// connection breaks. A Server's Handler runs on worker goroutines,
// concurrently; the request payload it gets is valid only during the call.
// Pollers spin for a while after each message (spinPolicy: SpinTime at the
// default), then arm their doorbells and park: an idle server or client uses no CPU.
// Request types with a ShortFunc are answered on the spinner when they
// can be without blocking.
package ring
