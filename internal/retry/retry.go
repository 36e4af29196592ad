// Package retry retries a probe for tests: a bounded number of attempts, a
// fixed gap between them, no backoff and no context. It is for tests only,
// where something held for a moment elsewhere (a lock, a background
// goroutine) may make a try decline.
package retry

import "time"

// Until calls try up to n times, gap apart, until it reports done; it
// returns whether it did. It does not sleep after the last try, nor call
// try at all when n < 1.
func Until(n int, gap time.Duration, try func() (done bool)) bool {
	for i := 0; i < n; i++ {
		if i > 0 {
			time.Sleep(gap)
		}
		if try() {
			return true
		}
	}
	return false
}
