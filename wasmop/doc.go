// Package wasmop is the host side of amduat.wasm.run version 1, the one
// operation of this project's extension registry OPREG/AMDUAT-WASM/1
// (SPECS.md §20): it runs a WebAssembly module, given as the node's first
// input, as a deterministic PEL operation.
//
// An Engine wraps a wazero runtime (compiler or interpreter) and caches
// compiled modules; Engine.Operation is the registry entry and Extend adds
// it to a registry. Before compiling, a pass over the binary (binary.go)
// validates what the project adds to WebAssembly 2.0 and rewrites the code:
// NaN results of float arithmetic become the canonical NaN, the memory and
// tables get their limits, a fuel counter charges one unit per function
// entry and loop iteration, and a stack counter bounds the nested calls,
// so that every call ends and gives the same result on every machine and
// engine. The module reaches its inputs and outputs
// through the host functions of import module "amduat" and sees a small,
// fully specified wasi_snapshot_preview1 (host.go): no files, no
// environment, a fake clock and a seeded random stream.
//
// The first call of a compiled module takes a snapshot of the state its
// _initialize leaves (snapshot.go, SPECS.md §20.9); later calls start
// from it on an instance kept from an earlier call, which gives the bytes
// a fresh instance and _initialize give, without their milliseconds.
//
// A call's deterministic failures are RUNTIME_FAILED with the status codes
// of status.go. Its operational failures (Options.MemoryBudget passed: every
// memory growth, table and output buffer is reserved before it is
// allocated; an optional wall-time bound; a closed engine) are not
// results: the
// operation panics with an *OperationalError, which Exec_DAG reports as an
// internal failure (errors.Is(err, ErrOperational)), so nothing is stored
// or cached for them.
package wasmop
