// Package golden compares test output with golden files under testdata/.
// Golden files are only rewritten deliberately, by running the tests with
// -update; a normal test run never writes them.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/ instead of comparing")

// Check compares got with the file at path, or rewrites the file under
// -update (creating its directory).
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file (rerun with -update after an intended change):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// Updating reports whether -update was given.
func Updating() bool { return *update }
