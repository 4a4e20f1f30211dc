// Package testmod holds the small WebAssembly modules that test
// amduat.wasm.run (SPECS.md §20): the test suite of package wasmop and the
// conformance vectors (vectors/wasm.run.json) use the same bytes. Each
// module is kept as its WebAssembly text source (NAME.wat) and its binary
// (NAME.wasm), built by build.sh with wabt's wat2wasm; the binaries are
// checked in, so nothing here needs wabt to run.
package testmod

import (
	"embed"
	"fmt"
)

//go:embed *.wasm
var files embed.FS

// Module returns the binary of the module NAME (without ".wasm").
func Module(name string) ([]byte, error) {
	b, err := files.ReadFile(name + ".wasm")
	if err != nil {
		return nil, fmt.Errorf("test module %s: %w", name, err)
	}
	return b, nil
}

// MustModule is Module for tests and generators: an unknown name panics.
func MustModule(name string) []byte {
	b, err := Module(name)
	if err != nil {
		panic(err)
	}
	return b
}
