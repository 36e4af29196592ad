package replication

import "errors"

// ErrStreamClosed: the region's replication stream was closed (the region
// was deposed, the server is fencing itself or stopping, or the stream is
// being replaced). A write appended after the close is never acknowledged
// through it.
var ErrStreamClosed = errors.New("replication: the region's replication stream is closed")

// Refuse is the replicator of a region none of whose writes may be
// acknowledged: WaitReplicated always fails with Err. It is what a closed
// stream leaves behind (Shipper.Close), so that detaching a stream can
// never turn into acknowledging without replication; whoever means a
// region to serve without replication sets that explicitly.
type Refuse struct{ Err error }

// WaitReplicated fails with r.Err (ErrStreamClosed when Err is nil).
func (r Refuse) WaitReplicated(uint64) error {
	if r.Err == nil {
		return ErrStreamClosed
	}
	return r.Err
}
