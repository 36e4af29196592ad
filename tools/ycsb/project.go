package ycsb

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// workloads holds the YCSB project's own workload files, workloada to
// workloadf, copied unchanged (Apache 2.0: workloads/LICENSE.txt).
//
//go:embed workloads
var workloads embed.FS

// ErrNoPropertyFile is returned by OpenProperties for a path that is
// neither a file nor the name of a YCSB project workload.
var ErrNoPropertyFile = errors.New("ycsb: no such property file")

// ProjectWorkloads lists the YCSB project workloads built in, by name
// (workloada...workloadf).
func ProjectWorkloads() []string {
	ents, _ := fs.ReadDir(workloads, "workloads")
	var out []string
	for _, e := range ents {
		if n := e.Name(); len(n) == len("workloada") && n[:len(n)-1] == "workload" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// OpenProperties opens the property file at path, or, when no file is
// there, the YCSB project workload the path names (its base name, such as
// workloada or workloads/workloadc), built in: `-P workloada` works
// without YCSB's files. The caller closes it.
func OpenProperties(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	name := filepath.Base(path)
	if !slices.Contains(ProjectWorkloads(), name) {
		return nil, fmt.Errorf("%w: %s (and not one of the built-in YCSB project workloads %v)", ErrNoPropertyFile, path, ProjectWorkloads())
	}
	b, err := workloads.ReadFile("workloads/" + name)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}
