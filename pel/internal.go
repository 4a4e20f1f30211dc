package pel

import (
	"errors"
	"fmt"

	"github.com/amduat/amduat/opreg"
)

// ErrInternal is wrapped by every internal failure of an evaluation: an
// operation that panicked or broke its declared output size. An internal
// failure is outside the PEL/1 model (SPECS.md §12.8): Exec_DAG returns it
// as an error, with no outputs and no ExecutionResultValue, so nothing is
// stored or memoized for it.
var ErrInternal = errors.New("internal failure")

// InternalError is an internal failure at one node. It names the node and
// the operation; Value is what the operation panicked with (nil for a
// broken size declaration). Its text is for people, never for results.
type InternalError struct {
	NodeID NodeID
	Op     opreg.OperationID
	Phase  string // "params", "size" or "run": which operation function failed
	Value  any
	Reason string
}

func (e *InternalError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("internal failure: node %d: operation %s: %s", e.NodeID, opText(e.Op), e.Reason)
	}
	return fmt.Sprintf("internal failure: node %d: operation %s panicked in %s: %v", e.NodeID, opText(e.Op), e.Phase, e.Value)
}

// Unwrap exposes ErrInternal, and the panic value when it is an error (so
// errors.As finds a runtime.Error).
func (e *InternalError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrInternal, err}
	}
	return []error{ErrInternal}
}

// contain runs f, turning a panic into an *InternalError for node id.
func contain(id NodeID, op opreg.OperationID, phase string, f func()) (ierr *InternalError) {
	defer func() {
		if v := recover(); v != nil {
			ierr = &InternalError{NodeID: id, Op: op, Phase: phase, Value: v}
		}
	}()
	f()
	return nil
}
