package wasmcachetest

import (
	"io/fs"
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

// TestWarm: concurrent warms of one module leave one entry, which this
// process's engines read (compiling the module here adds none, so the warm
// command wrote it where and as they look for it); a warm of the same
// module under another memory limit adds another one, and an invalid
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
	if err := Compile(dir, abi, 4); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("compiling the warmed module here added an entry: %v", got)
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

// TestTrim: above maxBytes the oldest entries (in wazero's subdirectory)
// go until at most keepBytes remain, and Warm's markers with them; lock
// and temporary files stay.
func TestTrim(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "wazero-dev-amd64-linux")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	const size = 300 << 20 // sparse files: no disk used
	old := time.Now().Add(-time.Hour)
	for i, name := range []string{"a0", "b1", "c2", "d3"} {
		f, err := os.Create(filepath.Join(sub, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		mt := old.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(filepath.Join(sub, name), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"x.lock", "x.ok", "wazero-dev-amd64-linux/y.123.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []string {
		t.Helper()
		var got []string
		err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
			if err == nil && de.Type().IsRegular() {
				rel, _ := filepath.Rel(dir, p)
				got = append(got, filepath.ToSlash(rel))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := trim(dir); err != nil {
		t.Fatal(err)
	}
	want := []string{"wazero-dev-amd64-linux/d3", "wazero-dev-amd64-linux/y.123.tmp", "x.lock"}
	if got := list(); !slices.Equal(got, want) {
		t.Fatalf("after trimming 1200 MiB: %v, want %v", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.ok"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := trim(dir); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 4 {
		t.Fatalf("trimming 300 MiB removed files: %v left", got)
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
