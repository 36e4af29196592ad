package ycsb

import (
	"errors"
	"fmt"
	"strings"
)

// Request distributions (YCSB's requestdistribution values).
const (
	DistZipfian = "zipfian" // scrambled zipfian, as YCSB's "zipfian"
	DistUniform = "uniform"
	DistLatest  = "latest"
)

// Insert orders (YCSB's insertorder values).
const (
	OrderHashed  = "hashed"
	OrderOrdered = "ordered"
)

// ErrBadWorkload is returned for an inconsistent Workload.
var ErrBadWorkload = errors.New("ycsb: bad workload")

// Workload describes one YCSB phase. Field tags name the YCSB core
// properties they hold, so that a property file maps onto the struct.
type Workload struct {
	// Name labels the phase in reports ("Load A", "Run B", ...).
	Name string `ycsb:"-"`
	// Load selects YCSB's load phase (-load, dotransactions=false): insert
	// InsertCount records from InsertStart. Otherwise run OperationCount
	// transactions over RecordCount existing records.
	Load bool `ycsb:"-"`

	RecordCount    int64 `ycsb:"recordcount"`
	OperationCount int64 `ycsb:"operationcount"`
	InsertStart    int64 `ycsb:"insertstart"`
	// InsertCount is the number of records a load inserts; 0 means
	// RecordCount - InsertStart.
	InsertCount int64 `ycsb:"insertcount"`

	ReadProportion            float64 `ycsb:"readproportion"`
	UpdateProportion          float64 `ycsb:"updateproportion"`
	InsertProportion          float64 `ycsb:"insertproportion"`
	ScanProportion            float64 `ycsb:"scanproportion"`
	ReadModifyWriteProportion float64 `ycsb:"readmodifywriteproportion"`

	RequestDistribution    string  `ycsb:"requestdistribution"`
	ZipfianConstant        float64 `ycsb:"zipfianconstant"`
	MinScanLength          int     `ycsb:"minscanlength"`
	MaxScanLength          int     `ycsb:"maxscanlength"`
	ScanLengthDistribution string  `ycsb:"scanlengthdistribution"`
	InsertOrder            string  `ycsb:"insertorder"`
	ZeroPadding            int     `ycsb:"zeropadding"`

	// Sizes is the Tebis key-value size mix (not a YCSB core property).
	Sizes SizeMix `ycsb:"kvsizes"`
}

// withDefaults fills zero fields with YCSB core defaults.
func (w Workload) withDefaults() Workload {
	if w.RequestDistribution == "" {
		w.RequestDistribution = DistUniform
	}
	if w.ZipfianConstant == 0 {
		w.ZipfianConstant = ZipfianConstant
	}
	if w.MinScanLength == 0 {
		w.MinScanLength = 1
	}
	if w.MaxScanLength == 0 {
		w.MaxScanLength = 1000
	}
	if w.ScanLengthDistribution == "" {
		w.ScanLengthDistribution = DistUniform
	}
	if w.InsertOrder == "" {
		w.InsertOrder = OrderHashed
	}
	if w.ZeroPadding == 0 {
		w.ZeroPadding = 1
	}
	if w.InsertCount == 0 {
		w.InsertCount = w.RecordCount - w.InsertStart
	}
	if w.Sizes == (SizeMix{}) {
		w.Sizes = MixS
	}
	return w
}

// Validate checks the workload after defaults are applied.
func (w Workload) Validate() error {
	w = w.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadWorkload, fmt.Sprintf(format, args...))
	}
	switch {
	case w.RecordCount < 0 || w.InsertStart < 0 || w.InsertCount < 0 || w.OperationCount < 0:
		return bad("negative record, insert or operation count")
	case w.Load && w.InsertCount == 0:
		return bad("load of zero records")
	case !w.Load && w.RecordCount == 0 && w.InsertProportion == 0:
		return bad("transactions over zero records and no inserts")
	}
	props := []float64{w.ReadProportion, w.UpdateProportion, w.InsertProportion, w.ScanProportion, w.ReadModifyWriteProportion}
	var sum float64
	for _, p := range props {
		if p < 0 {
			return bad("negative proportion %v", p)
		}
		sum += p
	}
	if !w.Load && sum == 0 {
		return bad("all operation proportions are zero")
	}
	switch w.RequestDistribution {
	case DistZipfian, DistUniform, DistLatest:
	default:
		return bad("requestdistribution %q (want zipfian, uniform or latest)", w.RequestDistribution)
	}
	switch w.ScanLengthDistribution {
	case DistZipfian, DistUniform:
	default:
		return bad("scanlengthdistribution %q (want zipfian or uniform)", w.ScanLengthDistribution)
	}
	if w.ZipfianConstant <= 0 || w.ZipfianConstant >= 1 {
		return bad("zipfianconstant %v outside (0, 1)", w.ZipfianConstant)
	}
	if w.MinScanLength < 1 || w.MaxScanLength < w.MinScanLength {
		return bad("scan length range [%d, %d]", w.MinScanLength, w.MaxScanLength)
	}
	if w.InsertOrder != OrderHashed && w.InsertOrder != OrderOrdered {
		return bad("insertorder %q (want hashed or ordered)", w.InsertOrder)
	}
	if w.ZeroPadding < 1 || w.ZeroPadding > 64 {
		return bad("zeropadding %d outside [1, 64]", w.ZeroPadding)
	}
	return w.Sizes.Validate()
}

// Builtin returns a YCSB core workload by name: "load-a" (alias "load"),
// and "a" to "f" (aliases "run-a", "runa", "workloada", ...), with record
// and operation counts left zero for the caller to set.
func Builtin(name string) (Workload, error) {
	n := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(name))
	n = strings.TrimPrefix(n, "workload")
	n = strings.TrimPrefix(n, "run")
	if n == "load" {
		n = "loada"
	}
	for _, w := range builtins {
		if strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(w.Name, "Run "), " ", "")) == n {
			return w, nil
		}
	}
	return Workload{}, fmt.Errorf("%w: unknown workload %q", ErrBadWorkload, name)
}

// BuiltinNames lists the built-in workloads in YCSB order.
func BuiltinNames() []string {
	names := make([]string, len(builtins))
	for i, w := range builtins {
		names[i] = w.Name
	}
	return names
}

// builtins are YCSB's workloads/workload[a-f] files (load phase for A).
var builtins = []Workload{
	{Name: "Load A", Load: true, InsertProportion: 1, RequestDistribution: DistZipfian},
	{Name: "Run A", ReadProportion: 0.5, UpdateProportion: 0.5, RequestDistribution: DistZipfian},
	{Name: "Run B", ReadProportion: 0.95, UpdateProportion: 0.05, RequestDistribution: DistZipfian},
	{Name: "Run C", ReadProportion: 1, RequestDistribution: DistZipfian},
	{Name: "Run D", ReadProportion: 0.95, InsertProportion: 0.05, RequestDistribution: DistLatest},
	{Name: "Run E", ScanProportion: 0.95, InsertProportion: 0.05, RequestDistribution: DistZipfian,
		MaxScanLength: 100, ScanLengthDistribution: DistUniform},
	{Name: "Run F", ReadProportion: 0.5, ReadModifyWriteProportion: 0.5, RequestDistribution: DistZipfian},
}
