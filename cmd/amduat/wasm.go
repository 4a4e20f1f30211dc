package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/wasmop"
)

// The `amduat wasm` command group (SPECS.md §16.5): store and inspect
// WebAssembly modules for the operation amduat.wasm.run (SPECS.md §20).
// This file also builds the operation registry every command that runs or
// renders programs uses: the kernel plus amduat.wasm.run.

func init() { addCommand(newWasmCmd) }

// maxModuleBytes bounds the module file `wasm add` reads.
const maxModuleBytes = 256 << 20

// wasmCacheName is the compilation cache directory inside an embedded
// store's directory.
const wasmCacheName = "wasm-cache"

// wasmCacheDir is where compiled modules are cached on disk: beside an
// embedded store opened for writing (<store>/wasm-cache), else (a remote or
// S3 store, or a read-only open, which must not create anything in the
// store directory) the user cache directory; "" (memory only) when there
// is none.
func (a *app) wasmCacheDir(readOnly bool) string {
	if !readOnly && !isRemote(a.storeDir) && !isS3(a.storeDir) {
		return filepath.Join(a.storeDir, wasmCacheName)
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "amduat", wasmCacheName)
	}
	return ""
}

// opRegistry returns the operations commands run programs with: the kernel
// plus amduat.wasm.run, whose compiled modules are cached in
// wasmCacheDir(readOnly). Call the returned function when done. A cache
// directory that cannot be used falls back to compiling in memory only:
// the cache changes no output.
func (a *app) opRegistry(ctx context.Context, readOnly bool) (*opreg.Registry, func(), error) {
	return a.opRegistryBudget(ctx, readOnly, 0)
}

// opRegistryBudget is opRegistry whose WebAssembly calls hold at most
// budget bytes of linear memory, tables and outputs together
// (wasmop.Options.MemoryBudget, SPECS.md §20.8; 0: unbounded): pel run
// gives it --max-memory.
func (a *app) opRegistryBudget(ctx context.Context, readOnly bool, budget uint64) (*opreg.Registry, func(), error) {
	if dir := a.wasmCacheDir(readOnly); dir != "" {
		if reg, done, err := newRegistry(ctx, wasmop.Options{CacheDir: dir, MemoryBudget: budget}); err == nil {
			return reg, done, nil
		}
	}
	return newRegistry(ctx, wasmop.Options{MemoryBudget: budget})
}

// staticOps is the registry of commands that only parse, check or render
// programs: the kernel plus amduat.wasm.run, compiling nothing.
func staticOps(ctx context.Context) (*opreg.Registry, func(), error) {
	return newRegistry(ctx, wasmop.Options{})
}

// newRegistry returns the kernel plus amduat.wasm.run on an engine with
// opts, and the function that closes the engine. With zero opts it serves
// too what only parses or renders programs: nothing is compiled until a
// module runs.
func newRegistry(ctx context.Context, opts wasmop.Options) (*opreg.Registry, func(), error) {
	reg, done, err := wasmop.KernelRegistry(ctx, opts)
	if err != nil {
		return nil, nil, fail(exitInternal, "", err)
	}
	return reg, done, nil
}

func newWasmCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "wasm",
		Short: "Store and inspect WebAssembly modules for the operation amduat.wasm.run",
		Long: `Programs run user code through the operation amduat.wasm.run version 1
(SPECS.md §20): its input 0 is a WebAssembly module stored as an untagged
artifact, its other inputs are the module's data inputs, and its params name
the exported entry function, the number of outputs and the memory and output
bounds. "add" validates and stores a module, "inspect" lists a stored
module's exports, imports and memory.

A module is a Go program built with the guest library
github.com/amduat/amduat/wasmop/guest:

  GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o op.wasm .

or any WebAssembly module that follows the ABI of SPECS.md §20. See the
README, "Write an operation in Go".`,
	}
	c.AddCommand(newWasmAddCmd(a), newWasmInspectCmd(a))
	return c
}

// moduleJSON is what wasm add and wasm inspect print under --json.
type moduleJSON struct {
	Ref     asl.Reference `json:"ref"`
	Size    uint64        `json:"size"`
	Exports []externJSON  `json:"exports"`
	Imports []externJSON  `json:"imports"`
	Memory  memoryJSON    `json:"memory"`
}

type externJSON struct {
	Module string `json:"module,omitempty"`
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Type   string `json:"type,omitempty"`
}

type memoryJSON struct {
	MinPages uint32  `json:"min_pages"`
	MaxPages *uint32 `json:"max_pages"`
}

func newModuleJSON(ref asl.Reference, size int, info wasmop.ModuleInfo) moduleJSON {
	j := moduleJSON{Ref: ref, Size: uint64(size), Exports: []externJSON{}, Imports: []externJSON{}}
	for _, e := range info.Exports {
		x := externJSON{Name: e.Name, Kind: e.Kind}
		if e.Kind == wasmop.KindFunc {
			x.Type = e.Type.String()
		}
		j.Exports = append(j.Exports, x)
	}
	for _, i := range info.Imports {
		x := externJSON{Module: i.Module, Name: i.Name, Kind: i.Kind}
		if i.Kind == wasmop.KindFunc {
			x.Type = i.Type.String()
		}
		j.Imports = append(j.Imports, x)
	}
	j.Memory.MinPages = info.MemoryMinPages
	if info.HasMemoryMax {
		m := info.MemoryMaxPages
		j.Memory.MaxPages = &m
	}
	return j
}

// writeModuleText prints a module description, one fact per line.
func writeModuleText(w io.Writer, j moduleJSON) {
	fmt.Fprintf(w, "module %s\nsize %d\n", j.Ref, j.Size)
	max := "none"
	if j.Memory.MaxPages != nil {
		max = fmt.Sprint(*j.Memory.MaxPages)
	}
	fmt.Fprintf(w, "memory min_pages %d max_pages %s\n", j.Memory.MinPages, max)
	for _, e := range j.Exports {
		fmt.Fprintf(w, "export %s %s%s\n", e.Kind, printableText([]byte(e.Name)), typeSuffix(e.Type))
	}
	for _, i := range j.Imports {
		fmt.Fprintf(w, "import %s %s.%s%s\n", i.Kind, printableText([]byte(i.Module)), printableText([]byte(i.Name)), typeSuffix(i.Type))
	}
}

func typeSuffix(t string) string {
	if t == "" {
		return ""
	}
	return " " + t
}

// invalidModule reports module bytes wasmop.Inspect rejects (exit 2).
func invalidModule(subject string, err error) error {
	return fail(exitUsage, subject, fmt.Errorf("not a module %s accepts: %w", wasmop.Name, err))
}

func newWasmAddCmd(a *app) *cobra.Command {
	var hashName string
	c := &cobra.Command{
		Use:   "add FILE.wasm | -",
		Short: "Validate a WebAssembly module and store it; print its reference",
		Long: `Read FILE (or standard input for "-"), check that it is a module
amduat.wasm.run accepts (SPECS.md §20.3: a valid WebAssembly 2.0 binary
without SIMD, only the imports of §20.4 and §20.6, no start section, segments
that fit), store it as an untagged artifact and print its reference: the
module input (input 0) of amduat.wasm.run nodes. Whether the entry function a
program names exists, and the program's memory limit, are checked when the
program runs.

A file that is not such a module is a usage error (exit 2) and nothing is
stored. JSON: {"ref","size","exports":[{"name","kind","type"}],
"imports":[{"module","name","kind","type"}],"memory":{"min_pages","max_pages"}}.`,
		Example: `  GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o op.wasm .
  amduat wasm add op.wasm`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			src := args[0]
			data, err := a.readFileLimited(src, maxModuleBytes, "module")
			if err != nil {
				return err
			}
			info, err := wasmop.Inspect(data)
			if err != nil {
				return invalidModule(src, err)
			}
			ref, err := a.storeProgram(c.Context(), hashName, src, asl.Untagged(data))
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(newModuleJSON(ref, len(data), info))
			}
			a.printf("%s\n", ref)
			return nil
		},
	}
	c.Flags().StringVar(&hashName, "hash", "", "hash for the module artifact: sha256 or blake3 (default: the store's)")
	return c
}

func newWasmInspectCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect REF",
		Short: "List a stored module's exports, imports and memory",
		Long: `Read the artifact REF, check it as amduat.wasm.run does (SPECS.md §20) and
print its reference, size, memory limits (in 64 KiB pages), exports and
imports with their function types:

  module REF
  size N
  memory min_pages N max_pages N|none
  export func NAME (PARAMS) -> (RESULTS)
  import func MODULE.NAME (PARAMS) -> (RESULTS)

An artifact that is not such a module is a usage error (exit 2). JSON: as
amduat wasm add --json.`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			ref, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			art, err := asl.Get(c.Context(), s, ref, maxModuleBytes)
			if err != nil {
				return refErr(args[0], err)
			}
			info, err := wasmop.Inspect(art.Bytes)
			if err != nil {
				return invalidModule(ref.String(), err)
			}
			j := newModuleJSON(ref, len(art.Bytes), info)
			if a.jsonOut {
				return a.printJSON(j)
			}
			var b bytes.Buffer
			writeModuleText(&b, j)
			if _, err := a.stdout.Write(b.Bytes()); err != nil {
				return fail(exitIO, "stdout", err)
			}
			return nil
		},
	}
}
