package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/internal/pki"
)

// TestCertsCommand: `tebis certs` prints the files it writes, which load
// as the servers' and the client's TLS configurations; run again over
// them it fails rather than overwrite.
func TestCertsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	run := func() (string, error) {
		var out bytes.Buffer
		app := newApp()
		app.Writer = &out
		err := app.RunContext(context.Background(), []string{"tebis", "certs", "--dir", dir, "--hosts", "127.0.0.1, node-a"})
		return out.String(), err
	}
	out, err := run()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []pki.Files{pki.ServerFiles(dir, "127.0.0.1"), pki.ServerFiles(dir, "node-a"), pki.ClientFiles(dir)} {
		for _, p := range []string{f.Cert, f.Key} {
			if !strings.Contains(out, "wrote "+p+"\n") {
				t.Errorf("output does not name %s:\n%s", p, out)
			}
		}
		if _, err := pki.Load(f); err != nil {
			t.Errorf("load %v: %v", f, err)
		}
	}
	if _, err := run(); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second run over the same directory: %v, want a refusal to overwrite", err)
	}
}
