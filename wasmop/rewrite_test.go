package wasmop

import (
	"context"
	"fmt"
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
	for _, export := range []string{"depth", "depth_return", "grow", "table_grow", "write"} {
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
