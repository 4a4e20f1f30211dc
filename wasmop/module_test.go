package wasmop_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/testmod"
)

func TestModules(t *testing.T) {
	es := newEngines(t, wasmop.Options{})
	ok := func(outs ...string) outcome { return outcome{status: pel.StatusOK, outputs: outs} }
	failed := func(code uint32, msg string) outcome {
		return outcome{status: pel.StatusRuntimeFailed, code: code, diags: []string{pelDiag(code), fmt.Sprintf("0x%08x:%s", code, msg)}}
	}
	invalid := failed(wasmop.StatusInvalidModule, "module is not valid WebAssembly 2.0 without SIMD and threads")
	for _, tc := range []struct {
		name   string
		module []byte
		p      wasmop.Params
		want   outcome
	}{
		{"not WebAssembly", []byte("hello"), params("run", 0), invalid},
		{"empty module bytes", nil, params("run", 0), invalid},
		{"header only", []byte("\x00asm\x01\x00\x00\x00"), params("run", 0), failed(wasmop.StatusMissingExport, `no function export named "run"`)},
		{"truncated", testmod.MustModule("abi")[:100], params("run", 0), invalid},
		{"SIMD", testmod.MustModule("simd"), params("run", 0), invalid},
		{"forbidden import", testmod.MustModule("forbidden_import"), params("run", 0), failed(wasmop.StatusForbiddenImport, "import env.now is not allowed")},
		{"import of the wrong type", testmod.MustModule("import_type"), params("run", 0),
			failed(wasmop.StatusForbiddenImport, "import amduat.input_count has type (i32) -> (i32), want () -> (i32)")},
		{"memory import", testmod.MustModule("import_memory"), params("run", 0),
			failed(wasmop.StatusForbiddenImport, "import amduat.memory: a memory import is not allowed")},
		{"start function", testmod.MustModule("start"), params("run", 0), failed(wasmop.StatusStartSection, "a start function is not allowed")},
		{"table too large", testmod.MustModule("big_table"), params("run", 0), failed(wasmop.StatusTableTooLarge, "table minimum 1048577 exceeds 1048576 elements")},
		{"memory minimum above the limit", testmod.MustModule("big_memory"), wasmop.Params{Export: "run", MaxMemoryPages: 2},
			failed(wasmop.StatusMemoryTooLarge, "memory minimum 3 pages exceeds max_memory_pages 2")},
		{"memory minimum at the limit", testmod.MustModule("big_memory"), wasmop.Params{Export: "run", MaxMemoryPages: 3}, ok()},
		{"_initialize runs first", testmod.MustModule("initialize"), params("run", 1), ok(u32le(42))},
		{"_initialize of the wrong type", testmod.MustModule("initialize_type"), params("run", 0),
			failed(wasmop.StatusExportType, "export _initialize has type () -> (i32), want () -> ()")},
		{"_initialize traps", testmod.MustModule("initialize_trap"), params("run", 0), failed(wasmop.StatusTrapUnreachable, "trap: unreachable")},
		{"data segment out of bounds", testmod.MustModule("data_oob"), params("run", 0),
			failed(wasmop.StatusSegmentBounds, "data segment 0: offset 65535 + 2 bytes exceed the memory of 65536 bytes")},
		{"element segment out of bounds", testmod.MustModule("elem_oob"), params("run", 0),
			failed(wasmop.StatusSegmentBounds, "element segment 1: offset 2 + 1 elements exceed table 0 of 2 elements")},
		{"no memory, empty write", testmod.MustModule("no_memory"), params("empty", 1), ok("")},
		{"no memory, one byte", testmod.MustModule("no_memory"), params("one", 1),
			failed(wasmop.StatusMemoryRange, "output_write: memory range [0, 1) is outside the memory of 0 bytes")},
		{"float NaNs", testmod.MustModule("floats"), params("run", 1),
			ok(strings.Repeat(u32le(wasmop.CanonicalNaN32), 12) + u32le(0x40400000) +
				strings.Repeat(u64le(wasmop.CanonicalNaN64), 12) + u64le(0x4008000000000000))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := es.runBoth(t, tc.module, tc.p)
			got.text = ""
			if got.String() != tc.want.String() {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestWASI pins the errno of every call wasi.wat makes (SPECS.md §20.6);
// the memory they write is pinned by the vector wasm.run.wasi-every-function.
func TestWASI(t *testing.T) {
	es := newEngines(t, wasmop.Options{})
	o := es.runBoth(t, testmod.MustModule("wasi"), params("run", 1))
	want := []uint32{0, 21, 0, 0, 0, 0, 0, 28, 21, 0, 21, 0, 28, 0, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 8, 8, 8, 8}
	if o.status != pel.StatusOK || len(o.outputs) != 1 || o.outputs[0][:len(want)*8] != u32le(want...) {
		t.Fatalf("got %s\nwant errnos %s", o, u32le(want...))
	}
	// The poll advanced the clock from 2000 to 7000 ns (§20.6).
	if got := o.outputs[0][len(want)*8+(4472-4096)*2:][:16]; got != u64le(7000) {
		t.Errorf("monotonic clock after poll_oneoff: %s, want %s", got, u64le(7000))
	}
}

func TestInspect(t *testing.T) {
	info, err := wasmop.Inspect(testmod.MustModule("abi"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Imports) != 10 || info.Imports[0].Module != "amduat" || info.Imports[0].Name != "input_count" ||
		!info.HasMemory || info.MemoryMinPages != 1 || info.HasMemoryMax || info.HasInitialize || info.NaNSites != 5 {
		t.Errorf("abi.wasm: %+v", info)
	}
	var names []string
	for _, e := range info.Exports {
		if e.Name == "echo" && e.Type.String() != "() -> (i32)" {
			t.Errorf("echo: type %s", e.Type)
		}
		names = append(names, e.Name)
	}
	if names[0] != "memory" || names[1] != "echo" {
		t.Errorf("exports %v", names)
	}
	for _, tc := range []struct {
		file string
		code uint32
	}{
		{"simd", wasmop.StatusInvalidModule},
		{"forbidden_import", wasmop.StatusForbiddenImport},
		{"start", wasmop.StatusStartSection},
		{"big_table", wasmop.StatusTableTooLarge},
		{"initialize_type", wasmop.StatusExportType},
	} {
		_, err := wasmop.Inspect(testmod.MustModule(tc.file))
		var me *wasmop.ModuleError
		if !errors.As(err, &me) || me.StatusCode != tc.code {
			t.Errorf("%s: got %v, want status code 0x%08x", tc.file, err, tc.code)
		}
	}
	if _, err := wasmop.Inspect(testmod.MustModule("initialize")); err != nil {
		t.Error(err)
	}
}

// TestUnusedInputsUntouched: data inputs may be tagged; outputs are untagged.
func TestOutputsUntagged(t *testing.T) {
	es := newEngines(t, wasmop.Options{})
	for _, reg := range es.regs {
		o := runOp(t, reg, testmod.MustModule("abi"), params("echo", 1), asl.Tagged(5, []byte("ab")))
		if o.status != pel.StatusOK || o.outputs[0] != "6162" {
			t.Fatal(o)
		}
	}
}
