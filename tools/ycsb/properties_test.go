package ycsb

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// workloadd is YCSB's workloads/workloadd, plus a Tebis size mix.
const workloadd = `# Yahoo! Cloud System Benchmark
# Workload D: Read latest workload
recordcount=1000
operationcount=1000
workload=site.ycsb.workloads.CoreWorkload

readallfields=true

readproportion=0.95
updateproportion=0
scanproportion=0
insertproportion=0.05

requestdistribution=latest
kvsizes : SD
maxscanlength \
  100
`

func TestParseProperties(t *testing.T) {
	var w Workload
	unknown, err := ParseProperties(strings.NewReader(workloadd), &w)
	if err != nil {
		t.Fatal(err)
	}
	want := Workload{RecordCount: 1000, OperationCount: 1000, ReadProportion: 0.95, InsertProportion: 0.05,
		RequestDistribution: DistLatest, Sizes: MixSD, MaxScanLength: 100}
	if w != want {
		t.Errorf("parsed %+v\nwant   %+v", w, want)
	}
	if !slices.Equal(unknown, []string{"workload", "readallfields"}) {
		t.Errorf("unknown keys %v", unknown)
	}
	if err := w.Validate(); err != nil {
		t.Error(err)
	}
	if _, err := ParseProperties(strings.NewReader("dotransactions=false\n"), &w); err != nil || !w.Load {
		t.Errorf("dotransactions=false: load %v, %v", w.Load, err)
	}
	if _, err := ParseProperties(strings.NewReader("recordcount=many\n"), &w); !errors.Is(err, ErrBadWorkload) {
		t.Errorf("bad value: %v", err)
	}
}
