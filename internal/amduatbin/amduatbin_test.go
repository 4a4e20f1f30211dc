package amduatbin_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/amduat/amduat/internal/amduatbin"
)

// TestBuildReuses: the built command runs, and a second Build returns the
// same file without relinking it: a relink would rename a new file into
// place, and the go command only touches an up-to-date target, so the
// file is still the same (device and inode).
func TestBuildReuses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the amduat command")
	}
	bin, err := amduatbin.Build(false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "amduat ") {
		t.Fatalf("%s version: %q, %v", bin, out, err)
	}
	before, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	again, err := amduatbin.Build(false)
	if err != nil || again != bin {
		t.Fatalf("second build: %s, %v; first %s", again, err, bin)
	}
	after, err := os.Stat(bin)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the second build replaced %s (%v)", bin, err)
	}
}
