//go:build wasip1

// Command probe exercises every function of package guest; the test
// TestGuestThroughHost builds it for wasip1 and runs each export through
// amduat.wasm.run.
package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/amduat/amduat/wasmop/guest"
)

// meta writes, per data input, "i size tag|untagged\n" to output 0.
//
//go:wasmexport meta
func meta() int32 {
	return guest.Run(func() error {
		for i := range guest.InputCount() {
			tag := "untagged"
			if t, ok := guest.InputTag(i); ok {
				tag = fmt.Sprintf("0x%08x", t)
			}
			fmt.Fprintf(guest.Output(0), "%d %d %s\n", i, guest.InputSize(i), tag)
		}
		return nil
	})
}

// readat reports ReadAt of input 0 across its end, at its end, at a
// negative offset, and Reader's Seek and Read, on output 0.
//
//go:wasmexport readat
func readat() int32 {
	return guest.Run(func() error {
		out := guest.Output(0)
		size := guest.InputSize(0)
		buf := make([]byte, 5)
		n, err := guest.ReadAt(0, buf, size-3)
		fmt.Fprintf(out, "tail %d %q %v\n", n, buf[:n], err)
		n, err = guest.ReadAt(0, buf, size)
		fmt.Fprintf(out, "end %d %v\n", n, err)
		_, err = guest.ReadAt(0, buf, -1)
		fmt.Fprintf(out, "negative %v\n", err != nil)
		r := guest.Reader(0)
		r.Seek(2, io.SeekStart)
		rest, err := io.ReadAll(r)
		fmt.Fprintf(out, "reader %q %v %d\n", rest, err, r.Size())
		fmt.Fprintf(out, "input %q\n", guest.Input(0))
		return nil
	})
}

// outputs writes "a" then "bc" to output 0 and "d" to output 1.
//
//go:wasmexport outputs
func outputs() int32 {
	return guest.Run(func() error {
		guest.Output(0).Write([]byte("a"))
		guest.Output(0).Write([]byte("bc"))
		guest.Output(1).Write([]byte("d"))
		return nil
	})
}

//go:wasmexport panics
func panics() int32 {
	return guest.Run(func() error { panic("boom") })
}

//go:wasmexport plainerr
func plainerr() int32 {
	return guest.Run(func() error { return errors.New("plain failure") })
}

//go:wasmexport wrapped
func wrapped() int32 {
	return guest.Run(func() error { return fmt.Errorf("context: %w", guest.Fail(77, "inner %d", 1)) })
}

//go:wasmexport failcode
func failcode() int32 {
	return guest.Run(func() error { return guest.Fail(65535, "largest code") })
}

func main() {}
