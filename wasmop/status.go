package wasmop

import (
	"errors"
	"fmt"

	"github.com/amduat/amduat/opreg"
)

// Status codes of amduat.wasm.run (SPECS.md §20.7). A module's own failure
// code c (1..65535) is reported as ModuleCodeBase | c; the host's failures
// use HostCodeBase | n.
const (
	ModuleCodeBase uint32 = 0x01000000
	HostCodeBase   uint32 = 0x01010000

	// Module rejected before it runs.
	StatusInvalidModule   = HostCodeBase | 0x01 // not WebAssembly 2.0 without SIMD and threads
	StatusForbiddenImport = HostCodeBase | 0x02 // an import outside §20.4/§20.6, or of the wrong type
	StatusStartSection    = HostCodeBase | 0x03 // the module has a start function
	StatusMemoryTooLarge  = HostCodeBase | 0x04 // memory minimum above max_memory_pages
	StatusTableTooLarge   = HostCodeBase | 0x05 // table minimum above MaxTableElements
	StatusMissingExport   = HostCodeBase | 0x06 // no function exported under the export name
	StatusExportType      = HostCodeBase | 0x07 // entry (or _initialize) of the wrong type
	StatusSegmentBounds   = HostCodeBase | 0x0A // an active segment outside its table or memory

	// Failures while running.
	StatusBadReturn      = HostCodeBase | 0x08 // entry returned a value outside 0..65535
	StatusProcExit       = HostCodeBase | 0x09 // the module called proc_exit
	StatusFuelExhausted  = HostCodeBase | 0x0B // the call ran out of fuel
	StatusStackExhausted = HostCodeBase | 0x0C // nested calls above MaxStackUnits
	StatusInputIndex     = HostCodeBase | 0x10 // input_* with an index out of range
	StatusInputOffset    = HostCodeBase | 0x11 // input_read offset negative or past the end
	StatusMemoryRange    = HostCodeBase | 0x12 // a host call's ptr/len outside memory
	StatusOutputIndex    = HostCodeBase | 0x13 // output_write with an index out of range
	StatusOutputLimit    = HostCodeBase | 0x14 // outputs above max_output_bytes

	// Traps (the WebAssembly specification's trap reasons).
	StatusTrapUnreachable       = HostCodeBase | 0x20
	StatusTrapMemoryOutOfBounds = HostCodeBase | 0x21
	StatusTrapDivideByZero      = HostCodeBase | 0x22
	StatusTrapIntegerOverflow   = HostCodeBase | 0x23
	StatusTrapInvalidConversion = HostCodeBase | 0x24
	StatusTrapTableOutOfBounds  = HostCodeBase | 0x25 // table index out of bounds or null element
	StatusTrapIndirectCallType  = HostCodeBase | 0x26

	// DiagConsole is the code of the diagnostic carrying the module's
	// captured standard output and error, present only on failure.
	DiagConsole uint32 = 0x01020000
)

// Bounds of what a failure carries (SPECS.md §20.4).
const (
	MaxErrorMessage = 1024 // bytes of set_error kept
	MaxConsole      = 4096 // bytes of fd 1 and fd 2 output kept
)

// ErrOperational is wrapped by every operational failure of a call: the
// call ran past its time bound, exhausted the runtime's stack, or the
// runtime failed for a reason of this machine. Such a failure is not a
// result (SPECS.md §20.8, §12.8): the operation panics with an
// *OperationalError, which pel reports as an internal failure (errors.Is
// finds both pel.ErrInternal and ErrOperational), so nothing is recorded,
// stored or cached.
var ErrOperational = errors.New("wasm operational failure")

// OperationalError is the panic value of an operational failure.
type OperationalError struct {
	Reason string
	Err    error
}

func (e *OperationalError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", Name, e.Reason, e.Err)
	}
	return fmt.Sprintf("%s: %s", Name, e.Reason)
}

func (e *OperationalError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrOperational, e.Err}
	}
	return []error{ErrOperational}
}

// failure is a deterministic failure of a call being built.
type failure struct {
	code uint32
	msg  string
}

func fail(code uint32, format string, args ...any) *failure {
	return &failure{code: code, msg: fmt.Sprintf(format, args...)}
}

// opError builds the operation's error, with the console diagnostic when
// console output was captured.
func (f *failure) opError(console []byte) *opreg.OpError {
	e := &opreg.OpError{StatusCode: f.code, Diagnostics: []opreg.Diagnostic{{Code: f.code, Message: []byte(f.msg)}}}
	if len(console) > 0 {
		e.Diagnostics = append(e.Diagnostics, opreg.Diagnostic{Code: DiagConsole, Message: console})
	}
	return e
}
