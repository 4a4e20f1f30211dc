package wasmop_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/amduat/amduat/internal/testexit"
	"github.com/amduat/amduat/internal/wasmcachetest"
)

// compCacheDir is the compilation cache (Options.CacheDir) the tests'
// compiler engines share: the one internal/wasmcachetest keeps between
// runs and shares with the other packages' tests, or, when the system has
// no user cache directory, a directory of this run that TestMain removes.
// Each module (under one page limit) is compiled once instead of once per
// test, which for the Go-built examples is most of a test's time under
// -race.
var compCacheDir string

func TestMain(m *testing.M) {
	dir, err := wasmcachetest.Dir()
	own := false
	if err != nil {
		if dir, err = os.MkdirTemp("", "wasmop-test-cache"); err != nil {
			fmt.Fprintln(os.Stderr, "wasmop tests: compilation cache:", err)
			os.Exit(2)
		}
		own = true
	}
	compCacheDir = dir
	code := m.Run()
	if own {
		os.RemoveAll(dir)
	}
	testexit.Exit(code)
}

// warmCache compiles module under pages into compCacheDir once for every
// test and every package running it (wasmcachetest.Warm), so that the
// tests' engines read it instead of each compiling it.
func warmCache(t testing.TB, module []byte, pages uint32) {
	t.Helper()
	if err := wasmcachetest.Warm(compCacheDir, module, pages); err != nil {
		t.Fatal(err)
	}
}
