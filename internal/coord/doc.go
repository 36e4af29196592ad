// Package coord is tebis's use of ZooKeeper: a session wrapper that never
// loses an event, and the cluster's znode layout (live region servers,
// master election, the region map) with the operations the master, the
// region servers and the clients perform on it.
//
// Contracts. A Session is safe for concurrent use. Watches are re-armed
// after every event and after reconnects; callbacks given to the Watch
// functions run on the watch's own goroutine, never on ZooKeeper's
// receive loop, so they may block (briefly) and may call the Session. A
// session expiry is reported on Session.Expired: ephemeral znodes of the
// old session are gone, and whoever owned one (a region server's
// registration, a master's candidacy) must stop acting on it and register
// again. Operations retry while the connection (not the session) is lost,
// bounded by their context; on a closed Session they fail at once with
// ErrNoSession.
package coord
