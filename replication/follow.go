package replication

// Follow is the replicator of a Build-Index backup's region: its writes
// are its primary's records (acknowledged by that primary) or a seed's,
// so none waits, and its L0 compactions go on. It also releases a frozen
// L0 that a stream refused while the server was the region's primary (a
// deposed primary taking the backup role: with no replicator the L0 stayed
// held, and the seed's own writes stalled behind it): as a backup the
// region serves no client, and its primary's seed replaces what it holds.
type Follow struct{}

// WaitReplicated confirms every position at once.
func (Follow) WaitReplicated(uint64) error { return nil }

// Replicated confirms every position at once (engine.ReplicatedProbe).
func (Follow) Replicated(uint64) bool { return true }
