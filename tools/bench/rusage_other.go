//go:build !unix

package bench

import (
	"fmt"
	"time"
)

// cpuTime is unsupported off unix.
func cpuTime() (time.Duration, error) {
	return 0, fmt.Errorf("%w: CPU time needs getrusage (unix)", ErrBadConfig)
}
