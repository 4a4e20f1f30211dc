package opreg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/amduat/amduat/asl"
)

// MaxNameLen is the largest operation name, in bytes, that a program or
// trace may carry (SPECS.md §9).
const MaxNameLen = 255

// Unbounded as Operation.MaxInputs means "no upper bound".
const Unbounded = -1

// ReservedPrefix starts every kernel operation name; Extend rejects it.
const ReservedPrefix = "pel."

var (
	// ErrDuplicate: an operation with the same (name, version) is already
	// registered.
	ErrDuplicate = errors.New("operation already registered")
	// ErrInvalidOperation: an Operation fails the registration rules.
	ErrInvalidOperation = errors.New("invalid operation")
	// ErrParams: a params value or params bytes are not acceptable to the
	// operation's codec. Params codecs wrap it.
	ErrParams = errors.New("invalid params")
)

// OperationID names an operation (seed §2.1). Two IDs are the same operation
// exactly when they are equal with ==.
type OperationID struct {
	Name    string
	Version uint32
}

// String renders the id as "name@version".
func (id OperationID) String() string { return fmt.Sprintf("%s@%d", id.Name, id.Version) }

// CheckName reports whether name is a well-formed operation name (SPECS.md
// §9): 1 to MaxNameLen bytes of valid UTF-8.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("operation name is empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("operation name is %d bytes, the maximum is %d", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("operation name is not valid UTF-8")
	}
	return nil
}

// Diagnostic is one PEL/1-CORE DiagnosticEntry (SPECS.md §8). Package pel
// aliases it as pel.DiagnosticEntry.
type Diagnostic struct {
	Code    uint32
	Message []byte
}

// OpError is an operation's dynamic (runtime) failure: Exec_DAG turns it into
// status RUNTIME_FAILED with summary.status_code = StatusCode (SPECS.md §12).
// StatusCode must be at least FirstOperationCode.
type OpError struct {
	StatusCode  uint32
	Diagnostics []Diagnostic
}

func (e *OpError) Error() string {
	if len(e.Diagnostics) > 0 {
		return fmt.Sprintf("operation failed with status code 0x%08x: %s", e.StatusCode, e.Diagnostics[0].Message)
	}
	return fmt.Sprintf("operation failed with status code 0x%08x", e.StatusCode)
}

// FirstOperationCode is the lowest status code an operation may return.
// Codes below it (kernel_op_code 0) are reserved for the scheme
// (SPECS.md §11.3, §12.3): Exec_DAG never reports an operation's code
// below it as that operation's status code.
const FirstOperationCode uint32 = 0x00010000

// Fail builds an OpError with one diagnostic whose code is the status code.
func Fail(statusCode uint32, format string, args ...any) *OpError {
	return &OpError{StatusCode: statusCode, Diagnostics: []Diagnostic{{Code: statusCode, Message: fmt.Appendf(nil, format, args...)}}}
}

// Call is what Exec_DAG passes to an operation for one node.
type Call struct {
	// Inputs are the node's resolved input artifacts, in DagInput order.
	// Their Bytes must not be modified. The slice itself is reused by the
	// engine after Run returns: keep its elements, never the slice.
	Inputs []asl.Artifact
	// Params is the value DecodeParams returned for the node's params.
	Params any
	// Global is Exec_DAG's global params artifact. It is non-nil whenever
	// the operation sets NeedsGlobalParams, and nil otherwise.
	Global *asl.Artifact
}

// RopeCall is what Exec_DAG passes to an operation's RunRope: the node's
// inputs and global params as ropes (asl.Rope, SPECS.md §12.9), whose bytes
// may be in memory or in a store, and the context of any read of them.
type RopeCall struct {
	Ctx    context.Context
	Inputs []*asl.Rope
	Params any
	Global *asl.Rope
}

// Operation is one registry entry: the semantics of an OperationID.
//
// Invariants the registry relies on but cannot check: DecodeParams and
// EncodeParams are mutual inverses on accepted bytes (one canonical
// encoding); Run is deterministic and pure; Run returns an OpError only with
// a StatusCode of at least FirstOperationCode (codes below it belong to the
// scheme: Exec_DAG reports a lower code as a contract violation, status
// code 0x00000001); nothing panics (Exec_DAG recovers a panic and reports
// an internal failure, outside the model: no result); all functions are
// safe for concurrent use (one Registry serves concurrent runs). Output
// artifacts may alias input or params bytes, and callers treat all artifact
// bytes as immutable.
type Operation struct {
	ID OperationID

	// MinInputs and MaxInputs bound the number of DagInputs a node using
	// this operation has; Exec_DAG checks them before evaluation and reports
	// INVALID_PROGRAM otherwise. MaxInputs may be Unbounded.
	MinInputs int
	MaxInputs int

	// NeedsGlobalParams makes Exec_DAG supply Call.Global, and report
	// INVALID_INPUTS when no global params artifact was given.
	NeedsGlobalParams bool

	// DecodeParams parses ParamsBytes strictly; an error makes the program
	// INVALID_PROGRAM. EncodeParams is its inverse.
	DecodeParams func(b []byte) (any, error)
	EncodeParams func(v any) ([]byte, error)

	// Run applies the operation.
	Run func(c Call) ([]asl.Artifact, *OpError)

	// OutputSize optionally declares, before Run, the total payload bytes
	// of the outputs Run will return for c (SPECS.md §12.6). It returns
	// ok = false when the size is not known in advance, or when Run will
	// fail; a declared size must be exact. Exec_DAG checks the output-bytes
	// limit against the declaration before calling Run, so an over-limit
	// output is never allocated, and after Run it checks that the outputs
	// match the declaration (a mismatch is an internal failure).
	OutputSize func(c Call) (total uint64, ok bool)

	// RunRope and SizeRope optionally apply the operation to ropes without
	// reading their bytes into memory (SPECS.md §12.9); Exec_DAG uses them
	// instead of Run and OutputSize when RunRope is set, and otherwise
	// passes Run the inputs read whole into memory. They must agree with
	// Run and OutputSize byte for byte. RunRope's error (not an OpError) is
	// operational: a store read that failed, or a value too large to
	// represent; Exec_DAG returns it with no result. Only the kernel sets
	// them today.
	RunRope  func(c RopeCall) ([]*asl.Rope, *OpError, error)
	SizeRope func(c RopeCall) (total uint64, ok bool)

	// ParamsToJSON and ParamsFromJSON optionally give params a readable form
	// in the JSON program format (SPECS.md §15). ParamsToJSON may return nil
	// to omit "params"; ParamsFromJSON receives nil when "params" is absent
	// or null. Both are set or neither; without them params are written as
	// {"raw":"<hex>"}. A readable form must not be an object whose only
	// member is "raw".
	ParamsToJSON   func(v any) ([]byte, error)
	ParamsFromJSON func(raw []byte) (any, error)
}

// ArityString describes the accepted input count: "exactly 1", "at least 1"
// or "1 to 3". It appears in Exec_DAG diagnostics (SPECS.md §12).
func (op *Operation) ArityString() string {
	switch {
	case op.MaxInputs == Unbounded:
		return fmt.Sprintf("at least %d", op.MinInputs)
	case op.MinInputs == op.MaxInputs:
		return fmt.Sprintf("exactly %d", op.MinInputs)
	default:
		return fmt.Sprintf("%d to %d", op.MinInputs, op.MaxInputs)
	}
}

// AcceptsInputs reports whether n inputs satisfy the arity.
func (op *Operation) AcceptsInputs(n int) bool {
	return n >= op.MinInputs && (op.MaxInputs == Unbounded || n <= op.MaxInputs)
}

func (op *Operation) check() error {
	if err := CheckName(op.ID.Name); err != nil {
		return fmt.Errorf("%w %s: %v", ErrInvalidOperation, op.ID, err)
	}
	switch {
	case op.DecodeParams == nil || op.EncodeParams == nil || op.Run == nil:
		return fmt.Errorf("%w %s: DecodeParams, EncodeParams and Run are required", ErrInvalidOperation, op.ID)
	case (op.ParamsToJSON == nil) != (op.ParamsFromJSON == nil):
		return fmt.Errorf("%w %s: set both ParamsToJSON and ParamsFromJSON or neither", ErrInvalidOperation, op.ID)
	case op.SizeRope != nil && op.RunRope == nil:
		return fmt.Errorf("%w %s: SizeRope needs RunRope", ErrInvalidOperation, op.ID)
	case op.MinInputs < 0:
		return fmt.Errorf("%w %s: MinInputs %d is negative", ErrInvalidOperation, op.ID, op.MinInputs)
	case op.MaxInputs != Unbounded && op.MaxInputs < op.MinInputs:
		return fmt.Errorf("%w %s: MaxInputs %d is below MinInputs %d", ErrInvalidOperation, op.ID, op.MaxInputs, op.MinInputs)
	}
	return nil
}

// Registry maps OperationIDs to Operations. It is immutable, so a *Registry
// is safe for concurrent use. The nil *Registry is empty.
type Registry struct {
	ops map[OperationID]*Operation
	ids []OperationID // sorted by name, then version
}

// NewRegistry builds a registry holding ops. Names with ReservedPrefix are
// rejected; use Kernel().Extend to build on the kernel.
func NewRegistry(ops ...Operation) (*Registry, error) {
	return (*Registry)(nil).Extend(ops...)
}

// Extend returns a new registry holding r's operations plus ops; r is not
// modified. It fails, returning no registry, if an op is malformed, uses the
// reserved "pel." prefix, or repeats an id already present (ErrDuplicate).
func (r *Registry) Extend(ops ...Operation) (*Registry, error) {
	for i := range ops {
		if strings.HasPrefix(ops[i].ID.Name, ReservedPrefix) {
			return nil, fmt.Errorf("%w %s: names beginning with %q are reserved for the kernel", ErrInvalidOperation, ops[i].ID, ReservedPrefix)
		}
	}
	return r.extend(ops)
}

func (r *Registry) extend(ops []Operation) (*Registry, error) {
	n := &Registry{ops: make(map[OperationID]*Operation, r.Len()+len(ops))}
	if r != nil {
		for id, op := range r.ops {
			n.ops[id] = op
		}
	}
	for i := range ops {
		op := ops[i]
		if err := op.check(); err != nil {
			return nil, err
		}
		if _, dup := n.ops[op.ID]; dup {
			return nil, fmt.Errorf("%s: %w", op.ID, ErrDuplicate)
		}
		n.ops[op.ID] = &op
	}
	n.ids = make([]OperationID, 0, len(n.ops))
	for id := range n.ops {
		n.ids = append(n.ids, id)
	}
	slices.SortFunc(n.ids, func(a, b OperationID) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		switch {
		case a.Version < b.Version:
			return -1
		case a.Version > b.Version:
			return 1
		}
		return 0
	})
	return n, nil
}

// Lookup returns the operation registered under id. The returned Operation
// is shared and must not be modified.
func (r *Registry) Lookup(id OperationID) (*Operation, bool) {
	if r == nil {
		return nil, false
	}
	op, ok := r.ops[id]
	return op, ok
}

// IDs lists the registered ids sorted by name (bytewise), then version.
func (r *Registry) IDs() []OperationID {
	if r == nil {
		return nil
	}
	return slices.Clone(r.ids)
}

// Len is the number of registered operations.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.ops)
}
