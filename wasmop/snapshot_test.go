package wasmop_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/examples"
	"github.com/amduat/amduat/wasmop/testmod"
)

// snapshotEngines are the engines of the snapshot equivalence tests: one
// that instantiates afresh and runs _initialize on every call (the
// behaviour without snapshots), and the default one under the compiler
// and the interpreter, which start calls from snapshots (SPECS.md §20.9).
type snapshotEngines struct {
	fresh *opreg.Registry
	names []string
	regs  []*opreg.Registry
	engs  []*wasmop.Engine
}

func newSnapshotEngines(t testing.TB) *snapshotEngines {
	return newSnapshotEnginesOf(t, true)
}

// newSnapshotEnginesOf is newSnapshotEngines, without the interpreter when
// interpreter is false.
func newSnapshotEnginesOf(t testing.TB, interpreter bool) *snapshotEngines {
	t.Helper()
	se := &snapshotEngines{}
	dir := compCacheDir // the compiler engines compile each module once
	opts := []wasmop.Options{{FreshInstances: true, CacheDir: dir}, {CacheDir: dir}}
	if interpreter {
		opts = append(opts, wasmop.Options{Interpreter: true})
	}
	for _, o := range opts {
		e, err := wasmop.New(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(context.Background()) })
		reg, err := wasmop.Extend(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case o.FreshInstances:
			se.fresh = reg
		case o.Interpreter:
			se.names, se.regs, se.engs = append(se.names, "interpreter"), append(se.regs, reg), append(se.engs, e)
		default:
			se.names, se.regs, se.engs = append(se.names, "compiler"), append(se.regs, reg), append(se.engs, e)
		}
	}
	return se
}

// same demands that got, from the engine named name, equals want, the
// fresh engine's outcome: outputs, status, diagnostics, result and trace
// bytes.
func sameOutcome(t testing.TB, what, name string, want, got outcome) {
	t.Helper()
	if got.text != want.text || got.String() != want.String() {
		t.Fatalf("%s: %s from snapshots differs from fresh instances:\n%s\n%s", what, name, got, want)
	}
}

// run runs one program on every engine, the snapshot engines twice (the
// second time on an instance kept from an earlier call when there is a
// snapshot), and compares.
func (se *snapshotEngines) run(t testing.TB, what string, program asl.Artifact, inputs []asl.Artifact) outcome {
	t.Helper()
	want := runProgram(t, se.fresh, program, inputs)
	for i, reg := range se.regs {
		for range 2 {
			sameOutcome(t, what, se.names[i], want, runProgram(t, reg, program, inputs))
		}
	}
	return want
}

// wasmVectors reads the programs and inputs of vectors/wasm.run.json.
func wasmVectors(t testing.TB) (ids []string, programs []asl.Artifact, inputs [][]asl.Artifact) {
	t.Helper()
	data, err := os.ReadFile("../vectors/wasm.run.json")
	if err != nil {
		t.Fatal(err)
	}
	type art struct {
		Tag   *uint32 `json:"type_tag"`
		Bytes string  `json:"bytes"`
	}
	var file struct {
		Vectors []struct {
			ID    string `json:"id"`
			Input struct {
				Program art   `json:"program"`
				Inputs  []art `json:"inputs"`
			} `json:"input"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	artifact := func(a art) asl.Artifact {
		b, err := hex.DecodeString(a.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if a.Tag != nil {
			return asl.Tagged(asl.TypeTag(*a.Tag), b)
		}
		return asl.Untagged(b)
	}
	for _, v := range file.Vectors {
		ids = append(ids, v.ID)
		programs = append(programs, artifact(v.Input.Program))
		var ins []asl.Artifact
		for _, a := range v.Input.Inputs {
			ins = append(ins, artifact(a))
		}
		inputs = append(inputs, ins)
	}
	if len(ids) == 0 {
		t.Fatal("no vectors in vectors/wasm.run.json")
	}
	return ids, programs, inputs
}

// tableLimitVectors are the wasm.run vectors whose tables reach 2^20
// elements (8 MiB of table each): three quarters of TestSnapshotVectors'
// CPU under -race. TestHostileTables runs the same modules at the same
// limits under both engines, and the conformance runner runs the vectors,
// in every run.
var tableLimitVectors = map[string]bool{"wasm.run.tables-64-at-limit": true, "wasm.run.table-grow-limit": true}

// TestSnapshotVectors runs every wasm.run vector with snapshots, in the
// file's order and then in reverse order on the same engines (so calls
// start from instances an earlier call of another export or input left),
// and demands the outcome of fresh instances each time. The default run
// leaves out tableLimitVectors; AMDUAT_LONG=1 (internal/longtest) runs
// every vector.
func TestSnapshotVectors(t *testing.T) {
	t.Parallel() // engines of its own; the compiler's cache is shared
	se := newSnapshotEngines(t)
	ids, programs, inputs := wasmVectors(t)
	if !longtest.Enabled() {
		n := len(ids)
		for i := len(ids) - 1; i >= 0; i-- {
			if tableLimitVectors[ids[i]] {
				ids = slices.Delete(ids, i, i+1)
				programs = slices.Delete(programs, i, i+1)
				inputs = slices.Delete(inputs, i, i+1)
			}
		}
		if n-len(ids) != len(tableLimitVectors) {
			t.Fatalf("%d of the %d table limit vectors found", n-len(ids), len(tableLimitVectors))
		}
		t.Logf("%d of %d vectors (%s=1 runs all)", len(ids), n, longtest.Env)
	}
	want := make([]outcome, len(ids))
	for i := range ids {
		want[i] = se.run(t, ids[i], programs[i], inputs[i])
	}
	for i := len(ids) - 1; i >= 0; i-- {
		for j, reg := range se.regs {
			sameOutcome(t, ids[i]+" (reverse order)", se.names[j], want[i], runProgram(t, reg, programs[i], inputs[i]))
		}
	}
	for i, e := range se.engs {
		if n, _ := e.IdleInstances(); n == 0 {
			t.Errorf("%s: no instance kept for reuse after %d vectors", se.names[i], 2*len(ids))
		}
		if now, _ := e.MemoryReserved(); now != 0 {
			t.Errorf("%s: %d bytes still reserved after the calls", se.names[i], now)
		}
	}
}

// TestSnapshotState runs the module whose _initialize leaves state in
// globals, memory, memory size, clock, random stream and console, and whose
// entry outputs and then changes it, ending in every way: each call, from
// a kept instance or not, must see what a fresh instance sees.
func TestSnapshotState(t *testing.T) {
	se := newSnapshotEngines(t)
	module := testmod.MustModule("snapshot_state")
	p := wasmop.Params{Export: "run", Outputs: 1, MaxMemoryPages: 4, MaxOutputBytes: 1 << 10}
	endings := []string{"", "ok", "f", "g", "ok", "t", "ok", "g", "g", "f", "", "t", "t", ""}
	for _, end := range endings {
		o := se.runOne(t, "ending "+end, module, p, asl.Untagged([]byte(end)))
		if end == "" {
			// State found: g 42, h, mem[100] 7, mem[70000] 9, 2 pages.
			if want := "2a000000" + "8877665544332211" + "07" + "09" + "02000000"; o.outputs[0][32:32+2*18] != want {
				t.Fatalf("state found %s, want %s", o.outputs[0][32:32+2*18], want)
			}
		}
	}
	fuelUsed, ok := wasmop.SnapshotFuel(se.engs[0], module, p.MaxMemoryPages)
	if !ok || fuelUsed != 2 {
		t.Fatalf("snapshot fuel %d, %v; want 2 units (_initialize and one call), true", fuelUsed, ok)
	}
	// Fuel around what _initialize uses: out of fuel in _initialize
	// (fresh instance), then in the entry (from the snapshot).
	for units := uint64(1); units <= 8; units++ {
		q := p
		q.MaxFuel = units
		se.runOne(t, "fuel", module, q, asl.Untagged([]byte("ok")))
	}
}

// runOne is run for one call of module.
func (se *snapshotEngines) runOne(t testing.TB, what string, module []byte, p wasmop.Params, inputs ...asl.Artifact) outcome {
	t.Helper()
	pa, all := oneNode(t, module, p, inputs...)
	return se.run(t, what, pa, all)
}

// TestSnapshotRefused runs the modules the engine must not snapshot: one
// whose code changes a table, one whose _initialize reads the call's
// inputs. Each call gives what a fresh instance gives.
func TestSnapshotRefused(t *testing.T) {
	se := newSnapshotEngines(t)
	p := wasmop.Params{Export: "run", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 64}
	table := testmod.MustModule("snapshot_table")
	for range 3 {
		if o := se.runOne(t, "table", table, p); !slices.Equal(o.outputs, []string{u32le(2)}) {
			t.Fatalf("snapshot_table: %s, want output %s", o, u32le(2))
		}
	}
	abi := testmod.MustModule("snapshot_abi")
	for _, n := range []int{0, 1, 2, 1, 0} {
		inputs := make([]asl.Artifact, n)
		for i := range inputs {
			inputs[i] = asl.Untagged(nil)
		}
		if o := se.runOne(t, "abi", abi, p, inputs...); !slices.Equal(o.outputs, []string{u32le(uint32(n))}) {
			t.Fatalf("snapshot_abi with %d inputs: %s", n, o)
		}
	}
	for i, e := range se.engs {
		for name, m := range map[string][]byte{"snapshot_table": table, "snapshot_abi": abi} {
			if _, ok := wasmop.SnapshotFuel(e, m, p.MaxMemoryPages); ok {
				t.Errorf("%s: %s has a snapshot", se.names[i], name)
			}
		}
	}
}

// TestSnapshotExamples runs the Go-built examples on varied inputs, each
// call twice, with snapshots and without, and around the fuel their
// _initialize uses. The default run takes the word count example on the
// compiler only (each example costs compilations of a 3 MB module, and the
// interpreter runs the Go runtime's _initialize slowly: minutes under
// -race on a loaded machine); AMDUAT_LONG=1 takes every example, under the
// interpreter too, and a 300 KiB input. The examples' own golden tests
// run every example with snapshots too, and TestExampleModulesDeterminism
// runs the thumbnail (every example under AMDUAT_LONG=1) under both
// engines.
func TestSnapshotExamples(t *testing.T) {
	t.Parallel() // engines of its own; the compiler's cache is shared
	exs := examples.All()
	long := longtest.Enabled()
	if !long {
		exs = exs[:1]
	}
	t.Logf("%d of %d examples, interpreter %v (%s=1 runs all, and the interpreter)", len(exs), len(examples.All()), long, longtest.Env)
	se := newSnapshotEnginesOf(t, long)
	inputSets := [][]asl.Artifact{
		{asl.Untagged([]byte("one two  three\nfour"))},
		{asl.Untagged([]byte(`{"a":[1,2.5,"x"]}`)), asl.Untagged([]byte("/a/1"))},
		{asl.Untagged(gradientPNG(t)), asl.Untagged([]byte("7"))},
		{asl.Untagged([]byte("x")), asl.Untagged([]byte("u64be"))},
		nil,
	}
	if long {
		inputSets = append(inputSets, []asl.Artifact{asl.Untagged(make([]byte, 300<<10))})
	}
	for _, ex := range exs {
		p := wasmop.Params{Export: ex.Export, Outputs: ex.Outputs, MaxMemoryPages: 2048, MaxOutputBytes: 1 << 20}
		warmCache(t, ex.Module, p.MaxMemoryPages)
		for _, ins := range inputSets {
			se.runOne(t, ex.Name, ex.Module, p, ins...)
		}
		used, ok := wasmop.SnapshotFuel(se.engs[0], ex.Module, p.MaxMemoryPages)
		if !ok {
			t.Fatalf("%s: no snapshot", ex.Name)
		}
		for _, units := range []uint64{used - 1, used, used + 1, used + 2} {
			q := p
			q.MaxFuel = units
			se.runOne(t, ex.Name+" fuel", ex.Module, q, inputSets[0]...)
		}
	}
}

// TestSnapshotMemoryBudget: an instance started from a snapshot reserves
// the snapshot's memory like a grown memory, idle instances count in the
// budget and are closed when a call needs their share of it, and a budget
// below the memory _initialize leaves is an operational failure.
func TestSnapshotMemoryBudget(t *testing.T) {
	// The word count example holds 3,193,320 bytes (48 pages of memory
	// after _initialize, 5,949 table elements); snapshot_state 1 page,
	// then 2 after its _initialize: with the word count's instance idle,
	// its growth needs the budget the idle instance holds.
	const budget = 3193320 + 100000
	dir := compCacheDir // both engines compile the example once
	e, err := wasmop.New(context.Background(), wasmop.Options{MemoryBudget: budget, CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	reg, err := wasmop.Extend(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	wc := examples.Wordcount()
	in := asl.Untagged([]byte("a b c"))
	run := func(module []byte, p wasmop.Params) {
		t.Helper()
		if o := runOp(t, reg, module, p, in); o.err != nil || o.status != pel.StatusOK {
			t.Fatalf("%s: %s", p.Export, o)
		}
	}
	idle := func(wantN int, wantBytes uint64) {
		t.Helper()
		n, b := e.IdleInstances()
		now, peak := e.MemoryReserved()
		if n != wantN || b != wantBytes || now != 0 || peak > budget {
			t.Fatalf("%d idle instances holding %d bytes, reserved %d, peak %d; want %d holding %d, 0 reserved, a peak within %d", n, b, now, peak, wantN, wantBytes, budget)
		}
	}
	wcParams := wasmop.Params{Export: wc.Export, Outputs: 1, MaxMemoryPages: 2048, MaxOutputBytes: 64}
	warmCache(t, wc.Module, wcParams.MaxMemoryPages)
	state := testmod.MustModule("snapshot_state")
	stateParams := wasmop.Params{Export: "run", Outputs: 1, MaxMemoryPages: 4, MaxOutputBytes: 1 << 10}
	for range 3 {
		run(wc.Module, wcParams)
	}
	idle(1, 3193320)
	// Another module's call needs the idle instance's share: it goes, and
	// that call's instance is kept instead; and back.
	run(state, stateParams)
	idle(1, 2*65536)
	run(wc.Module, wcParams)
	idle(1, 3193320)

	small, err := wasmop.New(context.Background(), wasmop.Options{MemoryBudget: 3 << 20, CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close(context.Background())
	smallReg, err := wasmop.Extend(nil, small)
	if err != nil {
		t.Fatal(err)
	}
	p := wasmop.Params{Export: wc.Export, Outputs: 1, MaxMemoryPages: 2048, MaxOutputBytes: 64}
	for range 2 {
		if o := runOp(t, smallReg, wc.Module, p, in); !errors.Is(o.err, wasmop.ErrMemoryBudget) {
			t.Fatalf("wordcount within a budget below its memory after _initialize: %s", o)
		}
	}
}
