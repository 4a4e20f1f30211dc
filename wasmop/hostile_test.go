package wasmop_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/testmod"
)

// The hostile cases of the audit of issue 22, each under a memory cap: the
// engines run with a memory budget (wasmop.Options.MemoryBudget), every
// case checks that the bytes reserved never passed it, and what would need
// gigabytes is refused before it is allocated. Nothing here holds more
// than a few tens of MiB.

// nInput is a data input holding the u32 N the hostile module reads.
func nInput(n uint32) asl.Artifact {
	return asl.Untagged(binary.LittleEndian.AppendUint32(nil, n))
}

// checkPeak fails when an engine ever held more than budget bytes.
func checkPeak(t *testing.T, es *engines, budget uint64) {
	t.Helper()
	for i, e := range es.engs {
		now, peak := e.MemoryReserved()
		if peak > budget || now != 0 {
			t.Errorf("%s: reserved %d bytes at the peak (budget %d), %d after the calls", es.names[i], peak, budget, now)
		}
	}
}

// wantBudgetFailure demands an operational failure of the memory budget
// from both engines.
func wantBudgetFailure(t *testing.T, es *engines, module []byte, p wasmop.Params, inputs ...asl.Artifact) {
	t.Helper()
	for i, reg := range es.regs {
		o := runOp(t, reg, module, p, inputs...)
		if !errors.Is(o.err, wasmop.ErrMemoryBudget) || !errors.Is(o.err, wasmop.ErrOperational) || !errors.Is(o.err, pel.ErrInternal) {
			t.Errorf("%s: got %v, want an operational failure of the memory budget", es.names[i], o)
		}
	}
}

// vmRSS is the process's resident memory in bytes (Linux; 0 elsewhere).
func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := bytes.Fields(line); len(f) == 3 && string(f[0]) == "VmRSS:" {
			kb, _ := strconv.ParseUint(string(f[1]), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestHostileMemory4GiB: a memory may reach 65,535 pages, never 65,536
// (SPECS.md §20.5), with the same result on both engines. Before the clamp
// the grow to 65,536 pages succeeded and the compiler then trapped on
// every access while the interpreter did not.
func TestHostileMemory4GiB(t *testing.T) {
	const budget = 65535*65536 + 16<<20 // the memory, the table (8 MiB) and the output
	es := newEngines(t, wasmop.Options{MemoryBudget: budget})
	hostile := testmod.MustModule("hostile")
	p := wasmop.Params{Export: "grow", Outputs: 1, MaxMemoryPages: 65536, MaxOutputBytes: 64}
	t.Run("65536 pages", func(t *testing.T) {
		// 1 + 65535 pages: above the largest memory, memory.grow gives -1.
		got := es.runBoth(t, hostile, p, nInput(65535))
		if got.status != pel.StatusOK || len(got.outputs) != 1 || got.outputs[0] != u32le(0xffffffff)+"00" {
			t.Fatalf("got %s, want OK with output ffffffff00", got)
		}
	})
	t.Run("65535 pages", func(t *testing.T) {
		if !wasmop.MmapSupported {
			t.Skip("linear memories are not mapped lazily here: the case would hold 4 GiB")
		}
		before := vmRSS()
		got := es.runBoth(t, hostile, p, nInput(65534))
		if got.status != pel.StatusOK || len(got.outputs) != 1 || got.outputs[0] != u32le(1)+"07" {
			t.Fatalf("got %s, want OK with output 0100000007", got)
		}
		if after := vmRSS(); after > before+256<<20 {
			t.Errorf("resident memory grew from %d to %d bytes: the 4 GiB memory was touched", before, after)
		}
	})
	t.Run("minimum 65536 pages", func(t *testing.T) {
		got := es.runBoth(t, testmod.MustModule("memory_65536"), wasmop.Params{Export: "run", MaxMemoryPages: 65536})
		want := "0x01010004:memory minimum 65536 pages exceeds the largest memory of 65535 pages"
		if got.code != wasmop.StatusMemoryTooLarge || len(got.diags) != 2 || len(got.diags) < 2 || got.diags[1] != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
	checkPeak(t, es, budget)
	t.Run("under a small budget", func(t *testing.T) {
		small := newEngines(t, wasmop.Options{MemoryBudget: 64 << 20})
		wantBudgetFailure(t, small, hostile, p, nInput(65534))
		checkPeak(t, small, 64<<20)
	})
}

// TestHostileStackDepth: nested calls stop at the same depth on both
// engines (SPECS.md §20.5): the entry (64 units) and N+1 frames of a
// function of one parameter (65 units each) fit 96,000 units up to N =
// 1474. Before the stack counter the interpreter ran out of stack near
// 2,000 frames where the compiler went on.
func TestHostileStackDepth(t *testing.T) {
	es := newEngines(t, wasmop.Options{MemoryBudget: 16 << 20})
	hostile := testmod.MustModule("hostile")
	for _, export := range []string{"depth", "depth_return"} {
		t.Run(export, func(t *testing.T) {
			p := wasmop.Params{Export: export, Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 64}
			if got := es.runBoth(t, hostile, p, nInput(1474)); got.status != pel.StatusOK || len(got.outputs) != 1 || got.outputs[0] != u32le(1474) {
				t.Fatalf("depth 1474: got %s, want OK", got)
			}
			got := es.runBoth(t, hostile, p, nInput(1475))
			want := "0x0101000c:stack exhausted: the calls in progress would use more than 96000 units"
			if got.code != wasmop.StatusStackExhausted || len(got.diags) < 2 || got.diags[1] != want {
				t.Fatalf("depth 1475: got %s, want %s", got, want)
			}
			// Far deeper than any runtime's stack: the same failure.
			if got := es.runBoth(t, hostile, p, nInput(1<<30)); got.code != wasmop.StatusStackExhausted {
				t.Fatalf("depth 2^30: got %s", got)
			}
		})
	}
	t.Run("two results", func(t *testing.T) {
		p := wasmop.Params{Export: "pair", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 64}
		if got := es.runBoth(t, hostile, p); got.status != pel.StatusOK || len(got.outputs) != 1 || got.outputs[0] != u32le(1, 2, 3, 4) {
			t.Fatalf("got %s, want OK with 1, 2, 3, 4", got)
		}
	})
	checkPeak(t, es, 16<<20)
}

// TestHostileWriters: a node writing 320 MiB or 1.6 GiB, 64 KiB at a time,
// without a max_output_bytes of its own, stops when its output buffer
// would pass the memory budget, before allocating it (the audit: 1.3 GB
// peak for the first, Go's fatal out-of-memory error for the second); with
// max_output_bytes 1 MiB it fails deterministically at the 17th write.
func TestHostileWriters(t *testing.T) {
	const budget = 16 << 20
	es := newEngines(t, wasmop.Options{MemoryBudget: budget})
	hostile := testmod.MustModule("hostile")
	p := wasmop.Params{Export: "write", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: ^uint64(0)}
	for _, n := range []uint32{5120, 25600} { // 320 MiB, 1.6 GiB
		wantBudgetFailure(t, es, hostile, p, nInput(n))
	}
	p.MaxOutputBytes = 1 << 20
	got := es.runBoth(t, hostile, p, nInput(5120))
	want := "0x01010014:output_write: 1048576 + 65536 output bytes exceed max_output_bytes 1048576"
	if got.code != wasmop.StatusOutputLimit || len(got.diags) < 2 || got.diags[1] != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	checkPeak(t, es, budget)
}

// TestHostileTables: at most 64 tables, sharing 2^20 elements (SPECS.md
// §20.5), reserved in the memory budget when the instance is created (the
// audit: 1,000 tables of 2^20 elements ended in Go's fatal out-of-memory
// error).
func TestHostileTables(t *testing.T) {
	const budget = 16 << 20
	es := newEngines(t, wasmop.Options{MemoryBudget: budget})
	p := wasmop.Params{Export: "run", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 1 << 10}
	all := func(v uint32) string {
		var s string
		for range 64 {
			s += u32le(v)
		}
		return s
	}
	t64 := testmod.MustModule("tables64")
	if got := es.runBoth(t, t64, p, nInput(16384)); got.status != pel.StatusOK || len(got.outputs) != 1 || got.outputs[0] != all(0) {
		t.Fatalf("64 tables of 16384: got %s", got)
	}
	if got := es.runBoth(t, t64, p, nInput(16385)); got.status != pel.StatusOK || len(got.outputs) != 1 || got.outputs[0] != all(0xffffffff) {
		t.Fatalf("64 tables of 16385: got %s", got)
	}
	got := es.runBoth(t, testmod.MustModule("tables65"), p, nInput(1))
	if want := "0x01010005:65 tables exceed the limit of 64"; got.code != wasmop.StatusTableTooLarge || len(got.diags) < 2 || got.diags[1] != want {
		t.Fatalf("65 tables: got %s, want %s", got, want)
	}
	one := wasmop.Params{Export: "table_grow", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 64}
	got = es.runBoth(t, testmod.MustModule("hostile"), one, nInput(1<<20))
	if got.status != pel.StatusOK || len(got.outputs) != 1 || got.outputs[0] != u32le(0, 0xffffffff, 1<<20) {
		t.Fatalf("one table grown by 2^20 twice: got %s", got)
	}
	checkPeak(t, es, budget)
	t.Run("under a small budget", func(t *testing.T) {
		// 64 tables of 16384 elements reserve 8 MiB.
		small := newEngines(t, wasmop.Options{MemoryBudget: 4 << 20})
		wantBudgetFailure(t, small, t64, p, nInput(1))
		checkPeak(t, small, 4<<20)
	})
}

// TestHostileFourNodes: four nodes growing their memories to 65,535 pages,
// run by four workers under a budget of 128 MiB, fail operationally before
// any of the memory is allocated (the audit: 8.4 GB resident).
func TestHostileFourNodes(t *testing.T) {
	const budget = 128 << 20
	es := newEngines(t, wasmop.Options{MemoryBudget: budget})
	pb, err := wasmop.EncodeParams(wasmop.Params{Export: "grow", Outputs: 1, MaxMemoryPages: 65535, MaxOutputBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	var prog pel.Program
	inputs := []asl.Artifact{asl.Untagged(testmod.MustModule("hostile"))}
	for i := range 4 {
		inputs = append(inputs, nInput(65534-uint32(i))) // distinct inputs: no memo
		prog.Nodes = append(prog.Nodes, pel.Node{ID: pel.NodeID(i + 1), Op: wasmop.OpID, Params: pb, Inputs: []pel.DagInput{pel.External(0), pel.External(uint32(i + 1))}})
		prog.Roots = append(prog.Roots, pel.RootRef{NodeID: pel.NodeID(i + 1)})
	}
	pa, err := pel.ProgramArtifact(prog)
	if err != nil {
		t.Fatal(err)
	}
	for i, reg := range es.regs {
		before := vmRSS()
		_, _, err := pel.ExecDAGWith(reg, pa, inputs, nil, nil, pel.RunOptions{Workers: 4, Context: context.Background()})
		if !errors.Is(err, wasmop.ErrMemoryBudget) || !errors.Is(err, pel.ErrInternal) {
			t.Errorf("%s: got %v, want an operational failure of the memory budget", es.names[i], err)
		}
		if after := vmRSS(); after > before+256<<20 {
			t.Errorf("%s: resident memory grew from %d to %d bytes", es.names[i], before, after)
		}
	}
	checkPeak(t, es, budget)
}
