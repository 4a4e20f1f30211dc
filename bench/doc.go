// Package bench holds the side-by-side measurements behind `amduat bench`
// and BENCHMARKS.md, as a library shared by the command and by
// `go test -bench`.
//
// Every figure is reported beside a baseline measured in the same process,
// close in time (interleaved where that is cheap), on the same
// deterministic inputs: large artifacts against SHA-256 of the same
// generated stream, small artifacts against SHA-256 of the same
// ArtifactBytes, `amduat put` against `git hash-object`, Exec_DAG against
// direct calls of the same operation functions, surface runs against a
// synced one-artifact commit. Nothing is hard-coded: a Row carries the
// figure, the baseline, their ratio, the target and whether it is met.
//
// Invariants:
//   - Inputs are deterministic: math/rand/v2 ChaCha8 streams from fixed
//     seeds (NewStream, FillRandom), never held whole in memory for the
//     large artifacts.
//   - Every group creates its stores and files under Env.Dir and removes
//     them before it returns.
//   - Peak RSS is measured per window (StartWindow): by resetting the
//     kernel's high-water mark where Linux allows it, else by sampling.
//     `amduat bench` runs each group in a child process, so no group sees
//     the heap another one left behind.
package bench
