package wasmop

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/opreg"
)

// seedModules are the checked-in test modules, and under AMDUAT_LONG=1
// (internal/longtest) the Go-built examples too: each costs seconds of
// compiling under -race, even for the interpreter, and the default run
// passes every example through the module pass and both engines'
// compilers in the other tests (TestExampleModulesDeterminism).
func seedModules(f *testing.F) [][]byte {
	f.Helper()
	var mods [][]byte
	pats := []string{"testmod/*.wasm"}
	if longtest.Enabled() {
		pats = append(pats, "examples/*/*.wasm")
	}
	for _, pat := range pats {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			mods = append(mods, b)
		}
	}
	return mods
}

func FuzzDecodeParams(f *testing.F) {
	for _, p := range []Params{
		{Export: "run", Outputs: 1, MaxMemoryPages: 256, MaxOutputBytes: 1 << 24},
		{Export: "é", Outputs: MaxOutputs, MaxMemoryPages: MaxMemoryPages, MaxOutputBytes: ^uint64(0)},
	} {
		b, err := EncodeParams(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 1, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeParams(b)
		if err != nil {
			if !errors.Is(err, opreg.ErrParams) {
				t.Fatalf("error does not wrap ErrParams: %v", err)
			}
			return
		}
		again, err := EncodeParams(p)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, re-encoded %x (%v)", b, again, err)
		}
		j, err := ParamsToJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParamsFromJSON(j)
		if err != nil || back.(Params) != p {
			t.Fatalf("JSON round trip of %+v: %s -> %+v (%v)", p, j, back, err)
		}
	})
}

var fuzzRT = wazero.NewRuntimeWithConfig(context.Background(),
	wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(Features).WithCustomSections(false))

// FuzzModulePass: the pass never panics, and when the runtime
// compiles a module the pass accepted, it compiles its rewrite too (the
// pass does not break valid modules). The runtime is only shown modules the
// pass accepted: it trusts declared counts and may allocate by them, which
// is one reason the pass runs first. Seeds: seedModules (the Go-built
// examples under AMDUAT_LONG=1 only).
func FuzzModulePass(f *testing.F) {
	for _, m := range seedModules(f) {
		f.Add(m, uint16(3))
	}
	f.Fuzz(func(t *testing.T, module []byte, pages uint16) {
		maxPages := uint32(pages)%MaxMemoryPages + 1
		d, err := decodeModule(module, maxPages)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error does not wrap errMalformed: %v", err)
			}
			return
		}
		cm, err := fuzzRT.CompileModule(context.Background(), module)
		if err != nil {
			return
		}
		cm.Close(context.Background())
		cm, err = fuzzRT.CompileModule(context.Background(), d.rewritten)
		if err != nil {
			t.Fatalf("runtime compiles the module but not its rewrite: %v", err)
		}
		cm.Close(context.Background())
	})
}

var fuzzEngine = func() *Engine {
	e, err := New(context.Background(), Options{Interpreter: true, MaxCompiled: 8})
	if err != nil {
		panic(err)
	}
	return e
}()

// FuzzRun: random modules, exports and inputs never panic (other than an
// operational failure) and never escape their limits. Calls that hit the
// time bound make minimization slow: fuzz with -fuzzminimizetime 0.
// Seeds: seedModules (the Go-built examples under AMDUAT_LONG=1 only) with
// seven exports.
func FuzzRun(f *testing.F) {
	for _, m := range seedModules(f) {
		for _, export := range []string{"run", "echo", "meta", "grow", "nan", "wasi", "fail_stderr"} {
			f.Add(m, export, []byte("hello"), uint8(2), uint16(9))
		}
	}
	op := fuzzEngine.Operation()
	f.Fuzz(func(t *testing.T, module []byte, export string, input []byte, pages uint8, maxOut uint16) {
		p := Params{Export: export, Outputs: 2, MaxMemoryPages: uint32(pages%8) + 1, MaxOutputBytes: uint64(maxOut), MaxFuel: 100000}
		pb, err := EncodeParams(p)
		if err != nil {
			return
		}
		pv, err := op.DecodeParams(pb)
		if err != nil {
			t.Fatal(err)
		}
		var outs []asl.Artifact
		var oerr *opreg.OpError
		func() {
			defer func() {
				if v := recover(); v != nil {
					if e, ok := v.(error); !ok || !errors.Is(e, ErrOperational) {
						panic(v)
					}
				}
			}()
			outs, oerr = op.Run(opreg.Call{Inputs: []asl.Artifact{asl.Untagged(module), asl.Untagged(input)}, Params: pv})
		}()
		if oerr != nil {
			if oerr.StatusCode < ModuleCodeBase || len(oerr.Diagnostics) == 0 || len(oerr.Diagnostics) > 2 {
				t.Fatalf("bad failure %+v", oerr)
			}
			for _, d := range oerr.Diagnostics {
				if len(d.Message) > MaxConsole+64 {
					t.Fatalf("diagnostic of %d bytes", len(d.Message))
				}
			}
			return
		}
		var total uint64
		for _, o := range outs {
			total += uint64(len(o.Bytes))
		}
		if outs != nil && (len(outs) != 2 || total > p.MaxOutputBytes) {
			t.Fatalf("%d outputs of %d bytes (limit %d)", len(outs), total, p.MaxOutputBytes)
		}
	})
}
