// Package guest is the guest side of the amduat.wasm.run operation
// (SPECS.md §20): a small library, standard library only, for writing an
// operation as an ordinary Go function and building it with the standard
// toolchain as a WebAssembly reactor module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o op.wasm .
//
// An operation is a function exported with //go:wasmexport whose body hands
// the work to Run:
//
//	//go:wasmexport upper
//	func upper() int32 {
//		return guest.Run(func() error {
//			_, err := guest.Output(0).Write(bytes.ToUpper(guest.Input(0)))
//			return err
//		})
//	}
//
//	func main() {}
//
// Inside the function, data input i (the node's input i+1: input 0 of the
// node is the module itself) is read with Input, ReadAt or Reader, its size
// and type tag with InputSize and InputTag; output o is written through
// Output(o). Returning an error made with Fail reports the operation's own
// status code and message; any other error reports code 1, a panic code 2.
//
// The functions wrap the host imports of module "amduat". They exist only
// when building for GOOS=wasip1 GOARCH=wasm; on other platforms the package
// holds only this documentation and the error type.
package guest

import (
	"errors"
	"fmt"
)

// Error is an operation's own failure: Code (1..65535) becomes the module
// status code, Message the failure message the host turns into the
// diagnostic (the host keeps at most 1024 bytes of it).
type Error struct {
	Code    uint16
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("operation failed with code %d: %s", e.Code, e.Message)
}

// Fail returns an *Error with the given code and formatted message. Code 0
// is not a failure code: Fail replaces it with 1.
func Fail(code uint16, format string, args ...any) error {
	if code == 0 {
		code = 1
	}
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Codes Run reports for failures that are not an *Error.
const (
	// CodeError: the function returned an error that is not an *Error.
	CodeError uint16 = 1
	// CodePanic: the function panicked; the message is the panic value.
	CodePanic uint16 = 2
)

// errorCode gives the code and message Run reports for err: the code of
// the first *Error in err's chain (CodeError if none), and the *Error's
// message if err is that *Error, err.Error() otherwise.
func errorCode(err error) (uint16, string) {
	var e *Error
	if !errors.As(err, &e) {
		return CodeError, err.Error()
	}
	code := e.Code
	if code == 0 {
		code = CodeError
	}
	if error(e) == err {
		return code, e.Message
	}
	return code, err.Error()
}
