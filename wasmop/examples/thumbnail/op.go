//go:build wasip1

package main

import "github.com/amduat/amduat/wasmop/guest"

//go:wasmexport thumbnail
func thumbnailOp() int32 { return guest.Run(run) }

func run() error {
	bound := defaultBound
	switch n := guest.InputCount(); n {
	case 1:
	case 2:
		b, err := parseBound(guest.Input(1))
		if err != nil {
			return err
		}
		bound = b
	default:
		return guest.Fail(codeInputs, "thumbnail takes 1 or 2 data inputs (image, bound), got %d", n)
	}
	out, err := thumbnail(guest.Input(0), bound)
	if err != nil {
		return err
	}
	_, err = guest.Output(0).Write(out)
	return err
}
