// Package wasmcachetest is the compilation cache (wasmop.Options.CacheDir,
// SPECS.md §20.9) that the tests of the packages running Go-built
// WebAssembly modules share. Compiling one of those modules (the examples
// under wasmop/examples, 3 MB each) costs some 15 CPU-seconds under the
// race detector, and the same modules are compiled by the tests of several
// packages, some run in parallel by go test (issue 25).
//
// The cache lives in the user's cache directory (os.UserCacheDir) and is
// kept between runs, so a module is compiled once per machine and wazero
// version: wazero keys each entry by the module's bytes, the CPU's
// features and its own version, and checks an entry's checksum when it
// reads it. A test binary does not know wazero's version (it has no
// module dependencies in its build information; wazero then says "dev"),
// so Dir keys the directory by the version the go command selects.
// Nothing in a result depends on the cache (§20.9). Warm compiles a module
// into it holding a lock file, so that test processes needing the same
// module compile it once between them, the others waiting for the lock and
// then reading the entry.
package wasmcachetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/filelock"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/wasmop"
)

// Subdir is the cache's directory under os.UserCacheDir.
const Subdir = "amduat/wasm-test-compile-cache"

// The cache is trimmed to keepBytes, oldest entries first, when Dir finds
// it above maxBytes (a compiled example takes some 10 MB; the entries of
// modules no test uses any more are never read again).
const (
	maxBytes  = 1 << 30
	keepBytes = 512 << 20
)

// Dir returns the shared cache directory of the wazero version in use,
// creating it (mode 0700) and trimming it when it has grown above 1 GiB.
// It fails when the system names no user cache directory, or the go
// command cannot say which wazero the module uses, or wazero is replaced
// by a directory (whose code may change under one version); callers then
// use a directory of their own.
func Dir() (string, error) {
	dirOnce.Do(func() { sharedDir, sharedErr = newDir() })
	return sharedDir, sharedErr
}

var (
	dirOnce   sync.Once
	sharedDir string
	sharedErr error
)

func newDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("wasm test compilation cache: %w", err)
	}
	v, err := wazeroVersion()
	if err != nil {
		return "", fmt.Errorf("wasm test compilation cache: %w", err)
	}
	dir := filepath.Join(base, Subdir, "wazero-"+v)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("wasm test compilation cache: %w", err)
	}
	if err := trim(dir); err != nil {
		return "", fmt.Errorf("wasm test compilation cache %s: %w", dir, err)
	}
	return dir, nil
}

// wazeroPath is the module path of wazero.
const wazeroPath = "github.com/tetratelabs/wazero"

// wazeroVersion returns the version of wazero the go command selects for
// the module of the working directory (a test's package directory).
func wazeroVersion() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}} {{with .Replace}}{{.Path}} {{.Version}}{{end}}", wazeroPath).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", wazeroPath, err)
	}
	f := strings.Fields(string(out))
	switch {
	case len(f) == 1 && validVersion(f[0]):
		return f[0], nil
	case len(f) == 3 && validVersion(f[2]):
		return f[2], nil
	}
	return "", fmt.Errorf("go list -m %s: %q: not a version, or wazero is replaced by a directory", wazeroPath, bytes.TrimSpace(out))
}

// validVersion reports whether v looks like a module version and is safe
// in a file name.
func validVersion(v string) bool {
	if !strings.HasPrefix(v, "v") || strings.Contains(v, "..") {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '-' || c == '+') {
			return false
		}
	}
	return true
}

// trim removes the oldest compiled modules (by modification time) under
// dir, wazero's subdirectories included, until they hold keepBytes when
// they hold more than maxBytes, and then the markers of Warm. Lock files
// and the temporary files of writes in progress are left alone.
func trim(dir string) error {
	type entry struct {
		path string
		fi   fs.FileInfo
	}
	var files []entry
	var markers []string
	var total int64
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case !de.Type().IsRegular():
			return nil
		case strings.HasSuffix(de.Name(), ".ok"):
			markers = append(markers, p)
		case !strings.Contains(de.Name(), "."):
			fi, err := de.Info()
			if err != nil {
				return nil // removed since it was listed
			}
			files = append(files, entry{p, fi})
			total += fi.Size()
		}
		return nil
	})
	if err != nil || total <= maxBytes {
		return err
	}
	slices.SortFunc(files, func(a, b entry) int { return a.fi.ModTime().Compare(b.fi.ModTime()) })
	for _, f := range files {
		if total <= keepBytes {
			break
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		total -= f.fi.Size()
	}
	// A module whose entry went is compiled again by its next Warm.
	for _, m := range markers {
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// warmExport names no export of any module the tests run: a call of it
// compiles the module (SPECS.md §20.3 steps 1 to 7) and stops at step 8.
const warmExport = "amduat-wasmcachetest-warm"

// Warm compiles module under the memory limit pages into the cache dir,
// unless it is there already, holding the lock file of that module and
// limit (so that concurrent callers, in this process or others, compile it
// once: the others wait and then find it there). An engine given dir as
// its CacheDir and no CallTimeout (a timeout compiles other code, which
// wazero keys apart) then reads the compiled module instead of compiling
// it. A module the engine rejects is not an error here; the caller's own
// call meets the rejection.
//
// The compiling is done by the command ./internal/wasmcachetest/warm, run
// with the go command without the race detector (wazero's compiler is not
// what the tests check, and under -race it takes ten times as long); when
// that fails, here. A marker file beside the lock says the module was
// compiled, so that later calls neither run the command nor compile.
func Warm(dir string, module []byte, pages uint32) error {
	sum := sha256.Sum256(module)
	name := filepath.Join(dir, fmt.Sprintf("%x-%d", sum[:16], pages))
	unlock, err := filelock.Lock(name + ".lock")
	if err != nil {
		return fmt.Errorf("warming the wasm compilation cache: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(name + ".ok"); err == nil {
		return nil
	}
	cmd := exec.Command("go", "run", "-ldflags=-X "+versionVar+"="+testVersion,
		"github.com/amduat/amduat/internal/wasmcachetest/warm", "-dir", dir, "-pages", strconv.FormatUint(uint64(pages), 10))
	cmd.Stdin = bytes.NewReader(module)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "wasmcachetest: compiling with the warm command: %v: %s; compiling here\n", err, bytes.TrimSpace(out))
		if err := Compile(dir, module, pages); err != nil {
			return err
		}
	}
	if err := os.WriteFile(name+".ok", nil, 0o600); err != nil {
		return fmt.Errorf("warming the wasm compilation cache: %w", err)
	}
	return nil
}

// wazero keeps the entries of one version in a subdirectory named after
// it, and writes the version into each: a test binary, which has no
// module dependencies in its build information, says testVersion, and so
// must the warm command, which would otherwise say the real one (the real
// one names the directory Dir returns).
const (
	versionVar  = "github.com/tetratelabs/wazero/internal/version.version"
	testVersion = "dev"
)

// Compile compiles module under the memory limit pages into the cache dir
// in this process (a call of a missing export through an engine whose
// CacheDir is dir).
func Compile(dir string, module []byte, pages uint32) error {
	ctx := context.Background()
	e, err := wasmop.New(ctx, wasmop.Options{CacheDir: dir})
	if err != nil {
		return fmt.Errorf("warming the wasm compilation cache: %w", err)
	}
	defer e.Close(ctx)
	op := e.Operation()
	pb, err := wasmop.EncodeParams(wasmop.Params{Export: warmExport, MaxMemoryPages: pages})
	if err != nil {
		return fmt.Errorf("warming the wasm compilation cache: %w", err)
	}
	pv, err := op.DecodeParams(pb)
	if err != nil {
		return fmt.Errorf("warming the wasm compilation cache: %w", err)
	}
	return run(op, opreg.Call{Inputs: []asl.Artifact{asl.Untagged(module)}, Params: pv})
}

// run makes the call, turning an operational failure (a panic of the
// engine) into an error.
func run(op opreg.Operation, c opreg.Call) (err error) {
	defer func() {
		if v := recover(); v != nil {
			e, ok := v.(error)
			if !ok || !errors.Is(e, wasmop.ErrOperational) {
				panic(v)
			}
			err = fmt.Errorf("warming the wasm compilation cache: %w", e)
		}
	}()
	op.Run(c)
	return nil
}
