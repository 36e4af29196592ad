package replication

import (
	"errors"

	"github.com/tebis-go/tebis/internal/replwire"
)

// Command is one primary-to-backup command: a Link carries it, a Replica
// applies it. Its kinds, fields and encoding are replwire's.
type Command = replwire.Command

// CmdKind says what a command asks.
type CmdKind = replwire.CmdKind

// The command kinds (replwire documents what each asks).
const (
	CmdFlush           = replwire.CmdFlush
	CmdCompactionStart = replwire.CmdCompactionStart
	CmdIndexSegment    = replwire.CmdIndexSegment
	CmdCompactionDone  = replwire.CmdCompactionDone
	CmdLogFree         = replwire.CmdLogFree
	CmdCheck           = replwire.CmdCheck
	CmdRebase          = replwire.CmdRebase
	CmdReset           = replwire.CmdReset
	CmdInSync          = replwire.CmdInSync
	CmdPairs           = replwire.CmdPairs
	CmdApplyFrom       = replwire.CmdApplyFrom
	CmdRequests        = replwire.CmdRequests
)

// Errors of the command protocol.
var (
	// ErrMalformed: a command that does not decode, or whose fields its
	// kind does not allow.
	ErrMalformed = replwire.ErrMalformed
	// ErrStaleEpoch: a command from an older epoch of the region.
	ErrStaleEpoch = errors.New("replication: stale region epoch")
	// ErrOutOfOrder: a command the backup's state does not allow now.
	ErrOutOfOrder = errors.New("replication: command out of order")
	// ErrOutOfSync: the backup's copy is not the primary's (it missed
	// commands while it or its connection was down).
	ErrOutOfSync = errors.New("replication: backup out of sync with its primary")
	// ErrReported: the backup reported its copy complete for a failover
	// at the command's epoch or a newer one (Replica.Report): it takes
	// nothing more from that epoch's primary.
	ErrReported = errors.New("replication: backup reported its copy for a failover")
	// ErrIncompleteCopy: a promotion of a replica whose copy may lack
	// acknowledged writes (Replica.Complete false).
	ErrIncompleteCopy = errors.New("replication: the backup's copy is not complete")
)
