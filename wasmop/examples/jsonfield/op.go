//go:build wasip1

package main

import "github.com/amduat/amduat/wasmop/guest"

//go:wasmexport jsonfield
func jsonfield() int32 { return guest.Run(run) }

func run() error {
	if n := guest.InputCount(); n != 2 {
		return guest.Fail(codeInputs, "jsonfield takes 2 data inputs (document, pointer), got %d", n)
	}
	out, err := extract(guest.Input(0), string(guest.Input(1)))
	if err != nil {
		return err
	}
	_, err = guest.Output(0).Write(out)
	return err
}
