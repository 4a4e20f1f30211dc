package examples

import (
	"context"
	"os"
	"runtime"
	"testing"
)

// TestRebuildIdentical rebuilds every example with the pinned toolchain and
// checks the checked-in modules are byte-identical. It runs the go command
// (about a second with a warm build cache, tens of seconds cold), so it
// skips under -short; it skips too when the installed toolchain is not the
// pinned one (other toolchains give other bytes).
func TestRebuildIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilds the examples with the go command; skipped under -short")
	}
	if v := runtime.Version(); v != GoVersion { // never download the pinned toolchain in a test
		t.Skipf("toolchain %s, the examples are pinned to %s", v, GoVersion)
	}
	ctx := context.Background()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := ModuleRoot(ctx, wd)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := Rebuild(ctx, root, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range bad {
		t.Errorf("%s: checked-in %s (%d bytes), rebuilt %s (%d bytes); run go run ./wasmop/examples/rebuild -write if the change is intended",
			m.Name, m.Checked, m.CheckedLen, m.Rebuilt, m.BuiltLen)
	}
}

func TestAllEmbedded(t *testing.T) {
	for _, ex := range All() {
		if len(ex.Module) < 8 || string(ex.Module[:4]) != "\x00asm" {
			t.Errorf("%s: embedded module is not a WebAssembly binary (%d bytes)", ex.Name, len(ex.Module))
		}
	}
}
