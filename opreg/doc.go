// Package opreg is the operation registry of PEL/PROGRAM-DAG/1 (SPECS.md
// §11, OPREG/PEL1-KERNEL and OPREG/PEL1-KERNEL-PARAMS/1).
//
// An Operation is identified by an OperationID (name, version). Each one
// declares its input arity, a params codec with exactly one canonical byte
// encoding (DecodeParams then EncodeParams returns the original bytes for
// every accepted input), and a pure Run function. Run never performs I/O,
// consults no clock, randomness or mutable global state, and reports a
// dynamic failure as an OpError whose StatusCode is at least
// FirstOperationCode (SPECS.md §11.3, §12 and the seed's §0).
//
// A Registry is immutable once built, so it is safe for concurrent use
// without locking. Kernel returns the registry of the five kernel operations;
// users add their own operations with Extend, which returns a new Registry and
// leaves the receiver untouched. Names beginning with "pel." are reserved for
// the kernel.
//
// Kernel runtime status codes are kernel_op_code<<16 | error_index with
// error_index >= 1 and kernel_op_code >= 1, so they are at least
// FirstOperationCode (0x00010000). Codes below it belong to the scheme; every
// operation must stay above it, and Exec_DAG reports a lower code as a
// contract violation (status code 0x00000001), never as the operation's.
//
// An Operation may declare its output size before it runs (OutputSize), so
// that Exec_DAG checks output limits and memory budgets before anything is
// allocated. A panic in any of an Operation's functions is contained by
// Exec_DAG and reported as an internal failure, outside the model.
//
// An Operation may also have a rope form (RunRope, SizeRope; SPECS.md
// §12.9) that works on asl.Rope values without reading them into memory;
// the kernel's operations have one. Operations without it receive their
// inputs in memory, as always.
package opreg
