// Package opreg is the operation registry of PEL/PROGRAM-DAG/1 (SPECS.md
// §11, OPREG/PEL1-KERNEL and OPREG/PEL1-KERNEL-PARAMS/1).
//
// An Operation is identified by an OperationID (name, version). Each one
// declares its input arity, a params codec with exactly one canonical byte
// encoding (DecodeParams then EncodeParams returns the original bytes for
// every accepted input), and a pure Run function. Run never performs I/O,
// consults no clock, randomness or mutable global state, and reports a
// dynamic failure as an OpError whose StatusCode is non-zero and is neither 2
// nor 3 (SPECS.md §12 and the seed's §0).
//
// A Registry is immutable once built, so it is safe for concurrent use
// without locking. Kernel returns the registry of the five kernel operations;
// users add their own operations with Extend, which returns a new Registry and
// leaves the receiver untouched. Names beginning with "pel." are reserved for
// the kernel.
//
// Kernel runtime status codes are kernel_op_code<<16 | error_index with
// error_index >= 1, so they are never 0, 2 or 3.
package opreg
