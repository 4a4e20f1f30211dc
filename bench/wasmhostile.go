package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/testmod"
)

// hostileWasm is one hostile amduat.wasm.run program of the audit of
// issue 22: a module of wasmop/testmod and the u32 N it reads, in nodes
// running export with max_memory_pages pages.
type hostileWasm struct {
	name, what string
	module     string
	export     string
	n          uint32
	pages      uint32
	maxOut     uint64
	nodes      int // amduat.wasm.run nodes, each with its own N (n, n-1, ...)
	args       []string
}

// hostileWasmCases are the cases of issue 22 item 6, each run like the
// other hostile programs: in its own `amduat pel run` process under the
// memory budget (GOMEMLIMIT, the default --max-memory, which the
// WebAssembly engine's memory budget follows too).
func hostileWasmCases() []hostileWasm {
	return []hostileWasm{
		{"wasm-memory-65535", "memory.grow to 65,535 pages (4 GiB - 64 KiB), the largest memory: reserved in the budget before it is mapped", "hostile", "grow", 65534, 65536, 64, 1, nil},
		{"wasm-memory-65536", "memory.grow to 65,536 pages (4 GiB) under max_memory_pages 65536: -1 on every engine (the compiler used to trap)", "hostile", "grow", 65535, 65536, 64, 1, nil},
		{"wasm-write-320m", "64 KiB output_writes to 320 MiB, no max_output_bytes, --max-output-bytes 1 MiB", "hostile", "write", 5120, 1, ^uint64(0), 1, []string{"--max-output-bytes", strconv.Itoa(1 << 20)}},
		{"wasm-write-1600m", "64 KiB output_writes to 1.6 GiB, no max_output_bytes, --max-output-bytes 1 MiB", "hostile", "write", 25600, 1, ^uint64(0), 1, []string{"--max-output-bytes", strconv.Itoa(1 << 20)}},
		{"wasm-tables", "64 tables each grown to 16,384 elements (2^20 together, 8 MiB reserved)", "tables64", "run", 16384, 1, 1 << 10, 1, nil},
		{"wasm-four-nodes", "four nodes growing their memories to 65,535 pages, --jobs 4", "hostile", "grow", 65534, 65535, 64, 4, []string{"--jobs", "4"}},
		{"wasm-deep-recursion", "a recursion 2^30 calls deep: the stack counter stops it at 96,000 units", "hostile", "depth", 1 << 30, 1, 64, 1, nil},
	}
}

// program is the case's program: a const holding the module, then for
// each node a const holding its N and the amduat.wasm.run node reading
// both; every node's output 0 is a root.
func (h hostileWasm) program() (pel.Program, error) {
	mp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: testmod.MustModule(h.module)})
	if err != nil {
		return pel.Program{}, err
	}
	wp, err := wasmop.EncodeParams(wasmop.Params{Export: h.export, Outputs: 1, MaxMemoryPages: h.pages, MaxOutputBytes: h.maxOut})
	if err != nil {
		return pel.Program{}, err
	}
	prog := pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpConst, Params: mp}}}
	for i := range h.nodes {
		np, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: binary.LittleEndian.AppendUint32(nil, h.n-uint32(i))})
		if err != nil {
			return pel.Program{}, err
		}
		c, w := pel.NodeID(2+2*i), pel.NodeID(3+2*i)
		prog.Nodes = append(prog.Nodes, pel.Node{ID: c, Op: opreg.OpConst, Params: np},
			pel.Node{ID: w, Op: wasmop.OpID, Params: wp, Inputs: []pel.DagInput{pel.FromNode(1, 0), pel.FromNode(c, 0)}})
		prog.Roots = append(prog.Roots, pel.RootRef{NodeID: w})
	}
	return prog, nil
}

// runHostileWasm runs hostileWasmCases, each in its own pel run process,
// and reports its peak RSS against the one-node baseline base.
func runHostileWasm(ctx context.Context, e *Env, dir string, base hostileOutcome, budget int64, timeout time.Duration) ([]Row, error) {
	var rows []Row
	for k, h := range hostileWasmCases() {
		prog, err := h.program()
		if err != nil {
			return nil, err
		}
		store := filepath.Join(dir, fmt.Sprintf("wasm%d", k))
		ref, err := putProgram(ctx, store, prog)
		if err != nil {
			return nil, err
		}
		e.logf("hostile: %s", h.name)
		o, err := runHostileChild(ctx, e.AmduatBin, store, budget, timeout, ref, h.args...)
		os.RemoveAll(store)
		if err != nil {
			return nil, fmt.Errorf("hostile: %s: %w", h.name, err)
		}
		rows = append(rows, Row{
			Name:     "hostile/" + h.name,
			Figure:   Quantity{mibOf(o.rss), "MiB"},
			Baseline: &Baseline{mibOf(base.rss), "MiB", "peak RSS of a one-node pel run"},
			Target:   &Target{fmt.Sprintf("<= %s (the memory budget) + 256 MiB", sizeText(budget)), OnFigure, AtMost, float64(budget)/mib + 256},
			PeakRSS:  o.rss,
			Note: fmt.Sprintf("%s; memory budget %s (GOMEMLIMIT, the default --max-memory, also the WebAssembly engine's), --timeout %s; %s: %s",
				h.what, sizeText(budget), timeout, o.d.Round(time.Millisecond), o.status),
		})
	}
	return rows, nil
}

// hostileWasmNames are the row names of runHostileWasm.
func hostileWasmNames() []string {
	var names []string
	for _, h := range hostileWasmCases() {
		names = append(names, h.name)
	}
	return names
}
