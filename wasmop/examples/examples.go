// Package examples holds example operations for amduat.wasm.run written in
// Go with package guest (one main package per directory, with its built
// module checked in beside it as NAME/NAME.wasm), and the build recipe
// that reproduces those modules byte for byte (Build; the command
// ./wasmop/examples/rebuild runs it and compares).
package examples

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the checked-in modules
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The checked-in modules.
var (
	//go:embed wordcount/wordcount.wasm
	wordcountWasm []byte
	//go:embed jsonfield/jsonfield.wasm
	jsonfieldWasm []byte
	//go:embed thumbnail/thumbnail.wasm
	thumbnailWasm []byte
)

// Example is one example operation.
type Example struct {
	// Name is the directory under wasmop/examples and the module's file
	// name without ".wasm".
	Name string
	// Export is the entry function to name in the params.
	Export string
	// Outputs is the number of outputs the operation writes.
	Outputs uint32
	// Module is the checked-in module's bytes.
	Module []byte
}

// All lists the examples in a fixed order.
func All() []Example {
	return []Example{
		{Name: "wordcount", Export: "wordcount", Outputs: 1, Module: wordcountWasm},
		{Name: "jsonfield", Export: "jsonfield", Outputs: 1, Module: jsonfieldWasm},
		{Name: "thumbnail", Export: "thumbnail", Outputs: 1, Module: thumbnailWasm},
	}
}

// Wordcount is the wordcount example.
func Wordcount() Example { return All()[0] }

// GoVersion is the toolchain the checked-in modules were built with; other
// toolchains may give other bytes.
const GoVersion = "go1.26.8"

// BuildArgs are the go build arguments (after "go build") of every
// example: a reactor module, no file paths, no VCS stamp, no build id.
var BuildArgs = []string{"-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-ldflags=-buildid="}

// BuildEnv is the environment Build adds to the current one: the target,
// the pinned toolchain, and no settings from the user's environment that
// change the output.
var BuildEnv = []string{"GOOS=wasip1", "GOARCH=wasm", "GOTOOLCHAIN=" + GoVersion, "CGO_ENABLED=0",
	"GOFLAGS=", "GOWASM=", "GOEXPERIMENT=", "GOAMD64="}

// ModuleRoot returns the directory of the amduat module containing dir
// (the one holding go.mod).
func ModuleRoot(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("%s is not inside a Go module", dir)
	}
	return filepath.Dir(gomod), nil
}

// ToolchainVersion returns the version of the toolchain Build uses (the
// pinned one, which the go command fetches if the installed one differs
// and GOTOOLCHAIN downloads are allowed).
func ToolchainVersion(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOVERSION")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), BuildEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w: %s", err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// Build builds example name from the module at root into the file out.
func Build(ctx context.Context, root, name, out string) error {
	args := append([]string{"build"}, BuildArgs...)
	args = append(args, "-o", out, "./wasmop/examples/"+name)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), BuildEnv...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building example %s: go %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(msg))
	}
	return nil
}

// Mismatch is one example whose rebuilt module differs from the
// checked-in one.
type Mismatch struct {
	Name                 string
	Checked, Rebuilt     string // SHA-256 in hex
	CheckedLen, BuiltLen int
}

// Rebuild builds every example into a temporary directory and compares
// each with its checked-in file; with write set it copies the rebuilt
// modules over the checked-in ones instead. It fails if the toolchain is
// not GoVersion.
func Rebuild(ctx context.Context, root string, write bool) ([]Mismatch, error) {
	v, err := ToolchainVersion(ctx, root)
	if err != nil {
		return nil, err
	}
	if v != GoVersion {
		return nil, fmt.Errorf("toolchain is %s, the examples are built with %s", v, GoVersion)
	}
	tmp, err := os.MkdirTemp("", "amduat-examples-")
	if err != nil {
		return nil, fmt.Errorf("rebuilding examples: %w", err)
	}
	defer os.RemoveAll(tmp)
	var bad []Mismatch
	for _, ex := range All() {
		built := filepath.Join(tmp, ex.Name+".wasm")
		if err := Build(ctx, root, ex.Name, built); err != nil {
			return nil, err
		}
		got, err := os.ReadFile(built)
		if err != nil {
			return nil, fmt.Errorf("rebuilding example %s: %w", ex.Name, err)
		}
		checkedPath := filepath.Join(root, "wasmop", "examples", ex.Name, ex.Name+".wasm")
		if write {
			if err := os.WriteFile(checkedPath, got, 0o644); err != nil {
				return nil, fmt.Errorf("writing example %s: %w", ex.Name, err)
			}
			continue
		}
		checked, err := os.ReadFile(checkedPath)
		if err != nil {
			return nil, fmt.Errorf("reading example %s: %w", ex.Name, err)
		}
		if !bytes.Equal(got, checked) {
			bad = append(bad, Mismatch{Name: ex.Name, Checked: sha(checked), Rebuilt: sha(got), CheckedLen: len(checked), BuiltLen: len(got)})
		}
	}
	return bad, nil
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
