package replication

import "github.com/tebis-go/tebis/internal/replwire"

// Hello is the private data of a primary's connection request to a
// backup for one region's log mirror (replwire.Hello).
type Hello = replwire.Hello
