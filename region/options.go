package region

import (
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tebis-go/tebis/rdma"
)

// Option gives Start what a server reaches outside its configuration in
// place of the real thing: its coordinator, its file system, its
// transports. Without options a server uses ZooKeeper (Config.Zookeeper),
// the operating system's file system and the shm and tcp transports.
type Option func(*deps)

// deps are the options given to Start; nil fields: the real thing.
type deps struct {
	coord  Coordinator
	fs     vfs.FS
	listen rdma.Transport
	dial   rdma.Transport
}

// WithCoordinator makes c the managed server's session in place of one
// dialed to the ensemble Config.Zookeeper names (which must still be set:
// it marks the server managed, and is only logged). The server owns c from
// Start on: it closes c when it closes, or when Start fails.
func WithCoordinator(c Coordinator) Option { return func(d *deps) { d.coord = c } }

// WithFS makes fs the volume's file system (Config.DataDir is a path in
// it; Config.FaultFS wraps it). The caller keeps fs; the server closes the
// files it opened in it when it closes.
func WithFS(fs vfs.FS) Option { return func(d *deps) { d.fs = fs } }

// WithListenTransport makes the server listen on tr, at Config.Shm and at
// Config.TCP (each if set), in place of the shm and tcp transports.
func WithListenTransport(tr rdma.Transport) Option { return func(d *deps) { d.listen = tr } }

// WithDialTransport makes the server reach its backups on tr, at the
// address Config.ReplicationTransport picks from the map (shm or tcp), in
// place of the shm and tcp transports.
func WithDialTransport(tr rdma.Transport) Option { return func(d *deps) { d.dial = tr } }
