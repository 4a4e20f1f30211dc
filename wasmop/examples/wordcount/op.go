//go:build wasip1

package main

import (
	"io"

	"github.com/amduat/amduat/wasmop/examples/wordcount/words"
	"github.com/amduat/amduat/wasmop/guest"
)

//go:wasmexport wordcount
func wordcount() int32 { return guest.Run(run) }

func run() error {
	format := ""
	switch guest.InputCount() {
	case 1:
	case 2:
		format = string(guest.Input(1))
	default:
		return guest.Fail(4, "wordcount takes 1 or 2 data inputs, got %d", guest.InputCount())
	}
	var c words.Counter
	// Stream the text in 64 KiB pieces: no copy of the whole input.
	if _, err := io.CopyBuffer(&c, guest.Reader(0), make([]byte, 64<<10)); err != nil {
		return err
	}
	out, err := encode(c.Count(), format)
	if err != nil {
		return guest.Fail(3, "%v", err)
	}
	_, err = guest.Output(0).Write(out)
	return err
}
