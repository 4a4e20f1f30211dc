package wasmop

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/wasmop/testmod"
)

var rawEngine = func() *Engine {
	e, err := New(context.Background(), Options{Interpreter: true})
	if err != nil {
		panic(err)
	}
	return e
}()

// rawRun runs export of bin (compiled as is) with the host functions and
// renders what happened: outputs, host failure, result or trap.
func rawRun(bin []byte, hasMemory bool, export string, input []byte) string {
	ctx := context.Background()
	cm, err := rawEngine.rt.CompileModule(ctx, bin)
	if err != nil {
		return "compile error"
	}
	defer cm.Close(ctx)
	st := &callState{inputs: []asl.Artifact{asl.Untagged(input)}, outputs: make([][]byte, 2), maxOut: 1 << 16, hasMemory: hasMemory}
	ctx = context.WithValue(ctx, stateKey{}, st)
	mod, err := rawEngine.rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return "instantiate error"
	}
	defer mod.Close(ctx)
	if g, ok := mod.ExportedGlobal(FuelExport).(api.MutableGlobal); ok {
		g.Set(1 << 20)
		st.fuel, st.budget = g, 1<<20
	}
	render := func(what string, err error) string {
		if st.fail != nil {
			return fmt.Sprintf("%s: host failure %x %s; outputs %x", what, st.fail.code, st.fail.msg, st.outputs)
		}
		for e := err; e != nil; {
			if fmt.Sprintf("%T", e) == "*wasmruntime.Error" {
				if e.Error() == "unreachable" && st.fuel != nil && st.fuel.Get() == 0 {
					return "out of fuel"
				}
				if g := mod.ExportedGlobal(StackExport); e.Error() == "unreachable" && g != nil && uint32(g.Get()) > MaxStackUnits {
					return "stack exhausted"
				}
				return what + ": trap " + e.Error()
			}
			u, ok := e.(interface{ Unwrap() error })
			if !ok {
				break
			}
			e = u.Unwrap()
		}
		return what + ": other error"
	}
	if f := mod.ExportedFunction(InitializeExport); f != nil {
		if _, err := f.Call(ctx); err != nil {
			return render("_initialize", err)
		}
	}
	f := mod.ExportedFunction(export)
	if f == nil {
		return "no export"
	}
	res, err := f.Call(ctx)
	if err != nil {
		return render("entry", err)
	}
	return fmt.Sprintf("result %v; outputs %x; message %q", res, st.outputs, st.errMsg)
}

// FuzzRewriteEquivalence: the module with fuel charges and the stack
// counter behaves exactly like the same module without them (same outputs,
// host failures, results and traps) whenever it does not run out of fuel
// or stack: the pass inserts code only at instruction boundaries, wraps
// each body in a block and turns return into a branch to its end, which
// change no meaning. (Without
// float instructions the reference is the original module with its limits
// rewritten, the code section copied unchanged.)
func FuzzRewriteEquivalence(f *testing.F) {
	f.Add(testmod.MustModule("abi"), "echo", []byte("some input"))
	for _, name := range []string{"initialize", "big_memory", "floats", "wasi"} {
		f.Add(testmod.MustModule(name), "run", []byte("some input"))
	}
	f.Add(testmod.MustModule("no_memory"), "one", []byte{})
	for _, export := range []string{"meta", "read_at_end", "read_past_end", "fail", "fail_stderr", "exit",
		"trap_unreachable", "trap_div_zero", "trap_overflow", "trap_memory", "trap_table", "trap_null", "trap_signature",
		"trap_memory_fill", "trap_table_get", "grow", "wasi", "count10", "dirty", "dump", "bad_output_index", "recurse"} {
		f.Add(testmod.MustModule("abi"), export, []byte("x"))
	}
	for _, export := range []string{"depth", "depth_return", "grow", "table_grow", "write", "pair"} {
		f.Add(testmod.MustModule("hostile"), export, []byte{0x10, 0, 0, 0})
	}
	f.Fuzz(func(t *testing.T, module []byte, export string, input []byte) {
		d, err := decodeModule(module, 4)
		if err != nil || d.checkModule(4) != nil {
			return
		}
		// The reference: the same module under the same limits, without
		// the fuel charges.
		ref, err := decodeModuleFuel(module, 4, false)
		if err != nil {
			t.Fatal(err)
		}
		orig := rawRun(ref.rewritten, d.hasMemory, export, input)
		if orig == "compile error" {
			return
		}
		got := rawRun(d.rewritten, d.hasMemory, export, input)
		if got != orig && got != "out of fuel" && got != "stack exhausted" {
			t.Fatalf("export %q:\noriginal  %s\nrewritten %s", export, orig, got)
		}
	})
}

// TestStackRewriteBytes pins the rewrite of SPECS.md §20.5 for one
// function, (func (result i32) i32.const 7 return): the fuel charge, the
// stack charge of 64 units, the body in a block with return turned into
// br 0, and the units taken off.
func TestStackRewriteBytes(t *testing.T) {
	module := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type () -> (i32)
		0x03, 0x02, 0x01, 0x00, // one function
		0x07, 0x07, 0x01, 0x03, 'r', 'u', 'n', 0x00, 0x00, // export "run"
		0x0a, 0x07, 0x01, 0x05, 0x00, 0x41, 0x07, 0x0f, 0x0b} // i32.const 7 return end
	d, err := decodeModule(module, 1)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte{0x00,
		0x23, 0x00, 0x42, 0x01, 0x7d, 0x24, 0x00, 0x23, 0x00, 0x50, 0x04, 0x40, 0x00, 0x0b, // fuel (global 0)
		0x23, 0x01, 0x41, 0xc0, 0x00, 0x6a, 0x24, 0x01, 0x23, 0x01, 0x41, 0x80, 0xee, 0x05, 0x4b, 0x04, 0x40, 0x00, 0x0b, // stack (global 1)
		0x02, 0x7f, 0x41, 0x07, 0x0c, 0x00, 0x0b, // block i32: i32.const 7; br 0; end
		0x23, 0x01, 0x41, 0xc0, 0x00, 0x6b, 0x24, 0x01, 0x0b} // units off; end
	want := append([]byte{0x0a, byte(len(body) + 2), 0x01, byte(len(body))}, body...)
	if !bytes.Contains(d.rewritten, want) {
		t.Fatalf("rewritten module %x does not hold the code section %x", d.rewritten, want)
	}
	if out := rawRun(d.rewritten, false, "run", nil); !strings.HasPrefix(out, "result [7];") {
		t.Fatalf("run: %s", out)
	}
}
