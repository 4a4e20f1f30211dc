// Command rebuild rebuilds the example operations under wasmop/examples
// with the pinned toolchain and the recipe in package examples, and checks
// that each is byte-identical to its checked-in NAME/NAME.wasm:
//
//	go run ./wasmop/examples/rebuild          # check; exit status 1 on a difference
//	go run ./wasmop/examples/rebuild -write   # replace the checked-in modules
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/amduat/amduat/wasmop/examples"
)

func main() {
	write := flag.Bool("write", false, "replace the checked-in modules with the rebuilt ones")
	flag.Parse()
	ctx := context.Background()
	wd, err := os.Getwd()
	if err == nil {
		wd, err = examples.ModuleRoot(ctx, wd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rebuild:", err)
		os.Exit(2)
	}
	bad, err := examples.Rebuild(ctx, wd, *write)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rebuild:", err)
		os.Exit(2)
	}
	for _, m := range bad {
		fmt.Printf("%s: checked-in %s (%d bytes), rebuilt %s (%d bytes)\n", m.Name, m.Checked, m.CheckedLen, m.Rebuilt, m.BuiltLen)
	}
	if len(bad) > 0 {
		os.Exit(1)
	}
	if *write {
		fmt.Printf("wrote %d modules\n", len(examples.All()))
		return
	}
	fmt.Printf("%d modules rebuilt byte-identically with %s\n", len(examples.All()), examples.GoVersion)
}
