// Package pel implements PEL/1-CORE values and the PEL/PROGRAM-DAG/1 scheme
// (the seed): the Program model and its canonical encoding
// ENC/PEL-PROGRAM-DAG/1, structural validation, the canonical topological
// order, Exec_DAG, the scheme descriptor and SchemeRef_DAG_1, the reference
// seed programs and the JSON program format.
//
// Normative sections of SPECS.md: §8 PEL/1-CORE values
// (ExecutionResultValue and its encoding), §9 ProgramBytes, §10 the scheme
// descriptor, §11 the kernel operations (package opreg), §12 Exec_DAG with
// its diagnostic table, §15 the JSON program format.
//
// Invariants:
//   - ExecDAG is a pure function of (registry, program bytes and tag, input
//     artifacts, params artifact): it does no I/O and reads no clock or
//     randomness, and its diagnostics contain only node ids, indices, counts,
//     operation names and versions.
//   - Every result ExecDAG returns satisfies CheckStatus, has pel1_version 1
//     and scheme_ref SchemeRefDAG1; on any status other than OK the outputs
//     are empty.
//   - DecodeProgram(EncodeProgram(p)) is Equal to p for every encodable p,
//     and EncodeProgram(DecodeProgram(b)) == b for every accepted b.
//   - ExecDAGRopes evaluates on asl.Rope values (SPECS.md §12.9): inputs
//     and outputs may be segments of stored artifacts, read (verified)
//     only when an operation needs their bytes, and the kernel's concat,
//     slice, const and params copy nothing. It gives the results and
//     output bytes ExecDAG gives; its only I/O is reading those ropes.
//   - No decoder panics or allocates more than a small multiple of its
//     input, and no validation step recurses: a million-node chain is
//     validated and ordered in O((N+E) log N) time on a constant stack.
package pel
