package main

import (
	"os"
	"testing"

	"github.com/tebis-go/tebis/internal/proctest"
)

// TestMain removes the tebis binary the tests built, once they are done.
func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }
