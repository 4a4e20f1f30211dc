package wasmop_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/testmod"
)

func call(t testing.TB, op opreg.Operation, module []byte, p wasmop.Params, inputs ...asl.Artifact) ([]asl.Artifact, *opreg.OpError) {
	t.Helper()
	pb, err := wasmop.EncodeParams(p)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := op.DecodeParams(pb)
	if err != nil {
		t.Fatal(err)
	}
	return op.Run(opreg.Call{Inputs: append([]asl.Artifact{asl.Untagged(module)}, inputs...), Params: pv})
}

func TestCompiledModuleCache(t *testing.T) {
	e, err := wasmop.New(context.Background(), wasmop.Options{MaxCompiled: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	op := e.Operation()
	abi := testmod.MustModule("abi")
	for i := range 3 {
		m := abi
		if i == 2 {
			m = append([]byte(nil), abi...) // equal bytes in another array
		}
		if _, oerr := call(t, op, m, params("nothing", 0)); oerr != nil {
			t.Fatal(oerr)
		}
	}
	if n := e.CachedModules(); n != 1 {
		t.Fatalf("%d cached modules after three calls of one module, want 1", n)
	}
	// The page limit is part of the key (the pass writes it into the module).
	call(t, op, abi, wasmop.Params{Export: "nothing", MaxMemoryPages: 9})
	call(t, op, testmod.MustModule("initialize"), params("run", 1))
	call(t, op, []byte("not wasm"), params("run", 1))
	if n := e.CachedModules(); n != 2 {
		t.Fatalf("%d cached modules, want the bound 2", n)
	}
	// Evicted modules compile again and give the same results.
	outs, oerr := call(t, op, abi, params("echo", 1), asl.Untagged([]byte("again")))
	if oerr != nil || string(outs[0].Bytes) != "again" {
		t.Fatal(outs, oerr)
	}
}

func TestCompilationCacheDir(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		e, err := wasmop.New(context.Background(), wasmop.Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		outs, oerr := call(t, e.Operation(), testmod.MustModule("abi"), params("echo", 1), asl.Untagged([]byte("x")))
		if oerr != nil || string(outs[0].Bytes) != "x" {
			t.Fatal(i, outs, oerr)
		}
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("cache dir after run %d: %v entries, %v", i, len(entries), err)
		}
	}
}

// TestConcurrentCalls runs many calls at once through one engine with a
// cache smaller than the modules in use (evictions while modules run).
func TestConcurrentCalls(t *testing.T) {
	e, err := wasmop.New(context.Background(), wasmop.Options{MaxCompiled: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	op := e.Operation()
	abi, init := testmod.MustModule("abi"), testmod.MustModule("initialize")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				in := fmt.Sprintf("goroutine %d call %d", g, i)
				outs, oerr := call(t, op, abi, params("echo", 1), asl.Untagged([]byte(in)))
				if oerr != nil || string(outs[0].Bytes) != in {
					errs <- fmt.Errorf("echo %q: %v %v", in, outs, oerr)
					return
				}
				outs, oerr = call(t, op, init, params("run", 1))
				if oerr != nil || len(outs[0].Bytes) != 4 || outs[0].Bytes[0] != 42 {
					errs <- fmt.Errorf("initialize: %v %v", outs, oerr)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClosedEngine(t *testing.T) {
	e, err := wasmop.New(context.Background(), wasmop.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := wasmop.Extend(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	e.Close(context.Background())
	o := runOp(t, reg, testmod.MustModule("abi"), params("nothing", 0))
	if !errors.Is(o.err, wasmop.ErrOperational) || !errors.Is(o.err, pel.ErrInternal) {
		t.Fatalf("got %v, want an operational failure", o)
	}
}

func BenchmarkTrivialCall(b *testing.B) {
	for _, interp := range []bool{false, true} {
		b.Run(fmt.Sprintf("interpreter=%v", interp), func(b *testing.B) {
			e, err := wasmop.New(context.Background(), wasmop.Options{Interpreter: interp})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(context.Background())
			op := e.Operation()
			abi := testmod.MustModule("abi")
			pv, _ := op.DecodeParams(must(wasmop.EncodeParams(params("echo", 1))))
			c := opreg.Call{Inputs: []asl.Artifact{asl.Untagged(abi), asl.Untagged([]byte("hi"))}, Params: pv}
			for b.Loop() {
				if _, oerr := op.Run(c); oerr != nil {
					b.Fatal(oerr)
				}
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestFreshMemory: a call's memory starts zeroed even when the buffer is
// reused from an earlier call that dirtied it (the pool of §20.9).
func TestFreshMemory(t *testing.T) {
	for _, interp := range []bool{false, true} {
		e, err := wasmop.New(context.Background(), wasmop.Options{Interpreter: interp})
		if err != nil {
			t.Fatal(err)
		}
		op := e.Operation()
		abi := testmod.MustModule("abi")
		for i := range 5 {
			if _, oerr := call(t, op, abi, params("dirty", 0)); oerr != nil {
				t.Fatal(oerr)
			}
			outs, oerr := call(t, op, abi, params("dump", 1))
			if oerr != nil || string(outs[0].Bytes) != string(make([]byte, 20)) {
				t.Fatalf("interpreter=%v round %d: %x %v", interp, i, outs[0].Bytes, oerr)
			}
			// A reused buffer larger than the memory does not widen it.
			if _, err := call(t, op, abi, params("dirty", 0)); err != nil {
				t.Fatal(err)
			}
			if _, oerr := call(t, op, abi, params("trap_memory", 0)); oerr == nil || oerr.StatusCode != wasmop.StatusTrapMemoryOutOfBounds {
				t.Fatalf("interpreter=%v round %d: a load past the 1-page memory after a 2-page call: %v", interp, i, oerr)
			}
		}
		e.Close(context.Background())
	}
}

// TestJSONProgram: the readable params of §20.2 in the JSON program format
// (§15), both ways.
func TestJSONProgram(t *testing.T) {
	e, err := wasmop.New(context.Background(), wasmop.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	reg, err := wasmop.Extend(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		params string
		want   wasmop.Params
	}{
		{`{"export":"echo","outputs":1,"max_memory_pages":256,"max_output_bytes":16777216}`, wasmop.Params{Export: "echo", Outputs: 1, MaxMemoryPages: 256, MaxOutputBytes: 16777216}},
		{`{"export":"echo","outputs":1,"max_memory_pages":256,"max_output_bytes":16777216,"max_fuel":99}`, wasmop.Params{Export: "echo", Outputs: 1, MaxMemoryPages: 256, MaxOutputBytes: 16777216, MaxFuel: 99}},
	} {
		src := `{"nodes":[{"id":1,"op":"amduat.wasm.run","version":1,"inputs":[{"input":0},{"input":1}],"params":` + tc.params + `}],"roots":[{"node":1,"output":0}]}`
		p, err := pel.ProgramFromJSON([]byte(src), reg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := wasmop.DecodeParams(p.Nodes[0].Params)
		if err != nil || got != tc.want {
			t.Fatalf("%s: %+v %v", tc.params, got, err)
		}
		back, err := pel.ProgramToJSON(p, reg)
		if err != nil || !strings.Contains(string(back), `"params":`+tc.params) {
			t.Fatalf("ProgramToJSON: %s %v", back, err)
		}
	}
	for _, bad := range []string{`{"export":"echo","outputs":1,"max_memory_pages":256}`, `{"export":"","outputs":1,"max_memory_pages":256,"max_output_bytes":1}`,
		`{"export":"echo","outputs":1,"max_memory_pages":0,"max_output_bytes":1}`, `{"export":"echo","outputs":1,"max_memory_pages":1,"max_output_bytes":1,"x":1}`} {
		src := `{"nodes":[{"id":1,"op":"amduat.wasm.run","version":1,"inputs":[{"input":0}],"params":` + bad + `}]}`
		if _, err := pel.ProgramFromJSON([]byte(src), reg); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
