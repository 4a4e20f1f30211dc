// Command warm compiles the WebAssembly module it reads on stdin into a
// wasm compilation cache directory (wasmop.Options.CacheDir) under a
// memory limit: wasmcachetest.Warm runs it, built without the race
// detector, so that tests built with -race need not compile a Go-built
// module under it (some 15 CPU-seconds a module, against one or two
// here). A test helper, not a user command.
//
//	go run ./internal/wasmcachetest/warm -dir DIR -pages N < module.wasm
//
// Exit status 0 when the module is compiled (or rejected by the engine),
// 1 on any other failure.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/amduat/amduat/internal/wasmcachetest"
)

func main() {
	dir := flag.String("dir", "", "the compilation cache directory")
	pages := flag.Uint("pages", 0, "the memory limit (max_memory_pages) the module is compiled under")
	flag.Parse()
	if *dir == "" || *pages == 0 || *pages > 65536 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: warm -dir DIR -pages N < module.wasm")
		os.Exit(1)
	}
	module, err := io.ReadAll(os.Stdin)
	if err == nil {
		err = wasmcachetest.Compile(*dir, module, uint32(*pages))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warm:", err)
		os.Exit(1)
	}
}
