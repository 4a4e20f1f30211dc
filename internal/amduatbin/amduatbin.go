// Package amduatbin builds the amduat command for the tests that run it
// (the end-to-end tests of cmd/amduat, the groups of bench) into one path
// per source tree and build variant under the user's cache directory
// (os.UserCacheDir, not the temp directory, where another user could plant
// a binary), and leaves it there. The go command relinks a target only when its sources
// changed, so the second package that asks, and every later run of the
// suite, reuse the binary instead of linking some 60 MB again (about ten
// CPU seconds each: issue 25). A lock file next to the binary serialises
// concurrent builds of the same path (two test binaries of one `go test
// ./...` run); the go command replaces the binary by a rename, so a
// process already running the old one is not disturbed.
package amduatbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/amduat/amduat/internal/filelock"
)

// Build builds github.com/amduat/amduat/cmd/amduat of the module that
// holds the working directory, with -race if race, and returns the path of
// the executable. Its directory holds nothing else a test could run, so it
// may be put on PATH.
//
// Without race it builds as the README installs the command, with
// CGO_ENABLED=0: a static executable, which starts in less CPU time than a
// dynamically linked one (cmd/amduat's tests start it about a thousand
// times), and the same program, since the only cgo of the module's
// dependencies is a zstd binding of Pebble that the store's tables do not
// use (they are Snappy-compressed; Pebble then builds its pure-Go zstd).
// The race detector needs cgo, so the race build keeps it.
func Build(race bool) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	variant := "plain"
	args := []string{"build"}
	if race {
		variant = "race"
		args = append(args, "-race")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("amduatbin: %w", err)
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "amduat", "test-bin", hex.EncodeToString(sum[:6])+"-"+variant)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("amduatbin: %w", err)
	}
	unlock, err := filelock.Lock(dir + ".lock")
	if err != nil {
		return "", fmt.Errorf("amduatbin: lock for %s: %w", dir, err)
	}
	defer unlock()
	bin := filepath.Join(dir, "amduat")
	cmd := exec.Command("go", append(args, "-o", bin, "./cmd/amduat")...)
	cmd.Dir = root
	if !race {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("amduatbin: go %v in %s: %w: %s", args, root, err, out)
	}
	return bin, nil
}

// moduleRoot is the nearest directory at or above the working directory
// that holds a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("amduatbin: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("amduatbin: no go.mod at or above %s", dir)
		}
	}
}
