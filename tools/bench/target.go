package bench

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/pki"
	"go.uber.org/zap"
)

// Sentinel errors.
var (
	// ErrNotFound is returned by Target.Get for an absent key.
	ErrNotFound = errors.New("bench: key not found")
	// ErrUnknownEngine is returned for an engine name with no Opener.
	ErrUnknownEngine = errors.New("bench: unknown engine")
	// ErrBadConfig is returned for an inconsistent Config.
	ErrBadConfig = errors.New("bench: bad config")
)

// Target is one storage engine under test. Its methods are called from many
// goroutines at once, except Close, WaitIdle and Breakdown.
type Target interface {
	// Put writes key -> value, durable on return in sync mode. The target
	// must not retain either slice.
	Put(key, value []byte) error
	// Get appends key's value to dst[:0] or returns a slice it owns
	// (valid until the next Get from the same goroutine), or ErrNotFound.
	Get(dst, key []byte) ([]byte, error)
	// Scan reads up to n pairs from the first key >= start and returns
	// the count and their key+value bytes.
	Scan(start []byte, n int) (pairs int, bytes int64, err error)
	// Sync makes every acknowledged write durable.
	Sync() error
	// WaitIdle returns once background work (flushes, compactions) is done.
	WaitIdle() error
	// Breakdown returns engine-specific cumulative counters by name.
	Breakdown() map[string]float64
	// Close releases the target.
	Close() error
}

// TargetOptions are what every Opener receives.
type TargetOptions struct {
	// FS is the (counting) file system all the target's files go through.
	FS vfs.FS
	// Dir is the target's own, empty data directory.
	Dir string
	// Sync selects durable-on-return writes (true) or buffered writes.
	Sync bool
	// L0Pairs and GrowthFactor configure the tebis engine; other engines
	// derive comparable settings from them (see each Opener).
	L0Pairs      int
	GrowthFactor int
	// SegmentSize is the tebis volume's segment size (0: the engine's
	// default); the local tebis engine only.
	SegmentSize int64
	// MeanPairSize is the workload's mean key+value size in bytes.
	MeanPairSize int
	Logger       *zap.Logger
	// The "server" engine: a region server started with ServerArgv (the
	// tebis binary and "server") on Dir, or the running servers of
	// ServerMap; reached over ServerTransport (shm or tcp).
	ServerArgv      []string
	ServerMap       regionmap.Source
	ServerTransport string
	ServerTLS       pki.Files     // the client's certificate files (none: plaintext)
	ServerProcs     int           // GOMAXPROCS of the server it starts (0: not set)
	ClientProcs     int           // this process's GOMAXPROCS from open to Close (0: unchanged)
	ClientSpin      time.Duration // the client's reply-poller spin (client.Config.SpinTime; 0: default)
}

// Opener creates a Target.
type Opener func(TargetOptions) (Target, error)

var openers = map[string]Opener{}

// Register makes an engine available under name. It is called from init
// functions; registering a name twice panics.
func Register(name string, o Opener) {
	if _, dup := openers[name]; dup {
		panic(fmt.Sprintf("bench: engine %q registered twice", name))
	}
	openers[name] = o
}

// Engines returns the registered engine names, tebis first.
func Engines() []string {
	names := make([]string, 0, len(openers))
	for n := range openers {
		names = append(names, n)
	}
	sort.Strings(names)
	if i := slices.Index(names, "tebis"); i > 0 {
		names = append([]string{"tebis"}, slices.Delete(names, i, i+1)...)
	}
	return names
}

func opener(name string) (Opener, error) {
	o, ok := openers[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (available: %v)", ErrUnknownEngine, name, Engines())
	}
	return o, nil
}
