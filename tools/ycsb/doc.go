// Package ycsb generates YCSB-style workloads: key names, request
// distributions (scrambled zipfian, uniform, latest), operation mixes and the
// Tebis paper's key-value size classes.
//
// Contracts:
//   - Keys follow YCSB core: record number n is named "user" + decimal of
//     FNV-64(n) (insertorder=hashed) or of n (insertorder=ordered), left
//     padded with zeros to ZeroPadding digits.
//   - The size of a record's key-value pair is a pure function of its record
//     number and the size mix (never of the seed), so an update rewrites a
//     record with the size it was loaded with.
//   - Given the same Workload, seed and worker index, a Worker produces the
//     same operation sequence, except where workers interact through the
//     shared insert counter (inserts and the "latest" distribution).
//   - A Generator is safe for concurrent use; each goroutine takes its own
//     Worker (Generator.Worker), which is not safe for concurrent use.
//     Inserts draw record numbers from the Generator's shared atomic counter
//     and must be acknowledged (Worker.Ack) once done, so readers never
//     choose a record whose insert has not completed (YCSB's acknowledged
//     counter).
//   - Returned keys and values alias buffers owned by the Worker and the
//     Generator: a key is valid until the worker's next operation and a
//     value must not be modified. Generating an operation does not allocate.
//
// Workload fields carry YCSB's standard property names (recordcount,
// operationcount, readproportion, ...) so that a property-file parser can
// fill them directly.
package ycsb
