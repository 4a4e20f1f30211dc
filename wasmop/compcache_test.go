package wasmop_test

import (
	"fmt"
	"os"
	"testing"
)

// compCacheDir is the compilation cache (Options.CacheDir) the tests'
// compiler engines share: each module (under one page limit) is compiled
// once for the package instead of once per test, which for the Go-built
// examples is most of a test's time under -race. TestMain removes it.
var compCacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmop-test-cache")
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmop tests: compilation cache:", err)
		os.Exit(2)
	}
	compCacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
