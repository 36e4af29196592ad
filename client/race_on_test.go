//go:build race

package client_test

// raceDetector: the race detector's instrumentation moves values to the
// heap, so allocation counts are checked only without it (make test runs
// those tests again without -race).
const raceDetector = true
