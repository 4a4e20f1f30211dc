package wasmcachetest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/wasmop/testmod"
)

// entries lists the compiled modules under dir (wazero's files, in the
// subdirectory it keys by its version and platform).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && !strings.Contains(d.Name(), ".") {
			names = append(names, d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestWarm: concurrent warms of one module leave one entry, a warm of the
// same module under another memory limit another one, and an invalid
// module none (and no error).
func TestWarm(t *testing.T) {
	dir := t.TempDir()
	abi := testmod.MustModule("abi")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = Warm(dir, abi, 4) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("after warming one module: entries %v, want one", got)
	}
	if err := Warm(dir, abi, 5); err != nil {
		t.Fatal(err)
	}
	if err := Warm(dir, []byte("\x00asm not a module"), 4); err != nil {
		t.Fatalf("an invalid module: %v, want no error", err)
	}
	if got := entries(t, dir); len(got) != 2 {
		t.Fatalf("after warming it under two memory limits and an invalid module: entries %v, want two", got)
	}
}

// TestTrim: above maxBytes the oldest entries go until at most keepBytes
// remain; lock and temporary files stay.
func TestTrim(t *testing.T) {
	dir := t.TempDir()
	const size = 300 << 20 // sparse files: no disk used
	old := time.Now().Add(-time.Hour)
	for i, name := range []string{"a0", "b1", "c2", "d3"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		mt := old.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(filepath.Join(dir, name), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"x.lock", "y.123.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := trim(dir); err != nil {
		t.Fatal(err)
	}
	var got []string
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		got = append(got, de.Name())
	}
	if want := []string{"d3", "x.lock", "y.123.tmp"}; !slices.Equal(got, want) {
		t.Fatalf("after trimming 1200 MiB: %v, want %v", got, want)
	}
	if err := trim(dir); err != nil {
		t.Fatal(err)
	}
	if des, _ := os.ReadDir(dir); len(des) != 3 {
		t.Fatalf("trimming 300 MiB removed files: %d left", len(des))
	}
}

func TestValidVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"v1.12.0": true, "v0.0.0-20250101000000-abcdef123456": true, "v2.0.0+incompatible": true,
		"": false, "1.2.3": false, "v1/../x": false, "v1..2": false, "v1 2": false,
	} {
		if got := validVersion(v); got != want {
			t.Errorf("validVersion(%q) = %t, want %t", v, got, want)
		}
	}
}
