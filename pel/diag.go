package pel

import (
	"errors"
	"fmt"

	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
)

// Scheme diagnostic codes (SPECS.md §12.3). Exec_DAG reports exactly one of
// them for a failure it detects itself; for a runtime failure it reports
// DiagNodeFailed followed by the operation's own diagnostics. Codes below
// 0x00010000 belong to the scheme (kernel_op_code 0); operation
// diagnostics use their own status codes.
const (
	DiagProgramTypeTag      uint32 = 0x0001     // INVALID_PROGRAM: program artifact not tagged 0x00000101
	DiagProgramMalformed    uint32 = 0x0002     // INVALID_PROGRAM: ProgramBytes do not decode
	DiagDuplicateNodeID     uint32 = 0x0003     // INVALID_PROGRAM: a node id repeats
	DiagNodeOrder           uint32 = 0x0004     // INVALID_PROGRAM: node ids not ascending
	DiagDanglingInput       uint32 = 0x0005     // INVALID_PROGRAM: DagInputNode names a missing node
	DiagSelfLoop            uint32 = 0x0006     // INVALID_PROGRAM: a node reads its own output
	DiagDanglingRoot        uint32 = 0x0007     // INVALID_PROGRAM: RootRef names a missing node
	DiagCycle               uint32 = 0x0008     // INVALID_PROGRAM: dependency cycle
	DiagUnknownOperation    uint32 = 0x0009     // INVALID_PROGRAM: (name, version) not in the registry
	DiagArity               uint32 = 0x000A     // INVALID_PROGRAM: wrong number of inputs for the operation
	DiagParamsDecode        uint32 = 0x000B     // INVALID_PROGRAM: params do not decode
	DiagMissingInput        uint32 = 0x000C     // INVALID_INPUTS: input_index >= len(inputs)
	DiagMissingGlobal       uint32 = 0x000D     // INVALID_INPUTS: operation needs the absent global params
	DiagNodeOutputIndex     uint32 = 0x000E     // INVALID_PROGRAM: DagInputNode output_index out of range
	DiagRootOutputIndex     uint32 = 0x000F     // INVALID_PROGRAM: RootRef output_index out of range
	DiagNodeFailed          uint32 = 0x0010     // RUNTIME_FAILED: names the failing node
	DiagOperationContract   uint32 = 0x0011     // RUNTIME_FAILED: operation returned a reserved status code
	DiagLimitNodes          uint32 = 0x0012     // RUNTIME_FAILED: Limits.MaxNodes reached (§12.6)
	DiagLimitOutputBytes    uint32 = 0x0013     // RUNTIME_FAILED: Limits.MaxOutputBytes exceeded (§12.6)
	StatusOperationContract uint32 = 0x00000001 // runtime status_code reported with DiagOperationContract
	StatusLimitNodes        uint32 = 0x00000004 // runtime status_code reported with DiagLimitNodes
	StatusLimitOutputBytes  uint32 = 0x00000005 // runtime status_code reported with DiagLimitOutputBytes
)

// ErrInvalidProgram is wrapped by every *ProgramError.
var ErrInvalidProgram = errors.New("invalid program")

// ProgramError is a deterministic reason a program is INVALID_PROGRAM. Code
// and Message form the DiagnosticEntry Exec_DAG reports. Decode failures
// also wrap the *enc.DecodeError (so errors.Is(err, enc.ErrMalformed) tells
// a decode failure from a structural one).
type ProgramError struct {
	Code    uint32
	Message string
	Decode  *enc.DecodeError
}

func (e *ProgramError) Error() string {
	if e.Decode != nil && e.Code != DiagProgramMalformed {
		return fmt.Sprintf("%s: %s", e.Message, e.Decode)
	}
	if e.Decode != nil {
		return fmt.Sprintf("%s: %s", e.Message, e.Decode.Reason)
	}
	return e.Message
}

// Unwrap exposes ErrInvalidProgram and, for decode failures, the
// *enc.DecodeError.
func (e *ProgramError) Unwrap() []error {
	if e.Decode != nil {
		return []error{ErrInvalidProgram, e.Decode}
	}
	return []error{ErrInvalidProgram}
}

// Diagnostic is the entry Exec_DAG reports for e.
func (e *ProgramError) Diagnostic() DiagnosticEntry {
	return DiagnosticEntry{Code: e.Code, Message: []byte(e.Message)}
}

func programErr(code uint32, de *enc.DecodeError, format string, args ...any) *ProgramError {
	return &ProgramError{Code: code, Message: fmt.Sprintf(format, args...), Decode: de}
}

func opText(id opreg.OperationID) string {
	return fmt.Sprintf("%s version %d", id.Name, id.Version)
}
