package conformance

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/testmod"
)

// RegistryKernelWasm names the registry of the kernel plus amduat.wasm.run
// version 1 (SPECS.md §7.9, §20). The Go runner runs each such vector under
// wazero's compiler and again under its interpreter and demands the same
// result bytes from both.
const RegistryKernelWasm = "kernel+wasm/1"

var (
	wasmOnce sync.Once
	wasmRegs [2]*opreg.Registry // compiler, interpreter
	wasmErr  error
)

// wasmRegistries returns the kernel+wasm registries of both engines. The
// engines live as long as the process.
func wasmRegistries() ([2]*opreg.Registry, error) {
	wasmOnce.Do(func() {
		for i, interp := range []bool{false, true} {
			var err error
			if wasmRegs[i], _, err = wasmop.KernelRegistry(context.Background(), wasmop.Options{Interpreter: interp}); err != nil {
				wasmErr = err
				return
			}
		}
	})
	return wasmRegs, wasmErr
}

// alternateRegistries are further registries a vector of the named
// registry must give the same result under.
func alternateRegistries(name string) ([]*opreg.Registry, error) {
	if name != RegistryKernelWasm {
		return nil, nil
	}
	regs, err := wasmRegistries()
	return regs[1:], err
}

func init() {
	RegisterGenerator("wasm.run", genWasmRun)
}

// wasmCase is one amduat.wasm.run vector: module (a test module's name, or
// raw bytes), params, data inputs.
type wasmCase struct {
	name, desc string
	module     string
	raw        []byte
	p          wasmop.Params
	inputs     []asl.Artifact
	status     pel.ExecutionStatus
	progOnly   *asl.Artifact // a whole program instead of the one-node program
	diag       uint32
}

func wasmParams(export string, outputs, pages uint32, maxOut uint64) wasmop.Params {
	return wasmop.Params{Export: export, Outputs: outputs, MaxMemoryPages: pages, MaxOutputBytes: maxOut}
}

// u32Input is a data input holding n as a little-endian u32 (the N of
// the hostile test module).
func u32Input(n uint32) asl.Artifact {
	return asl.Untagged(binary.LittleEndian.AppendUint32(nil, n))
}

func withFuel(p wasmop.Params, units uint64) wasmop.Params {
	p.MaxFuel = units
	return p
}

func mustWasmParams(p wasmop.Params) []byte {
	b, err := wasmop.EncodeParams(p)
	if err != nil {
		panic(err)
	}
	return b
}

// wasmProgram is node 1 = amduat.wasm.run over inputs 0 (the module) to n,
// whose outputs are the roots.
func wasmProgram(p wasmop.Params, n int) asl.Artifact {
	var ins []pel.DagInput
	for i := range n + 1 {
		ins = append(ins, pel.External(uint32(i)))
	}
	var rs []pel.RootRef
	for o := range p.Outputs {
		rs = append(rs, pel.RootRef{NodeID: 1, OutputIndex: o})
	}
	return progArt(pel.Program{Nodes: []pel.Node{opNode(1, wasmop.OpID, mustWasmParams(p), ins...)}, Roots: rs})
}

func wasmCases() []wasmCase {
	hello, tagged, empty := asl.Untagged([]byte("hello, world")), asl.Tagged(0xfffffffe, []byte("xyz")), asl.Untagged(nil)
	ok, rf := pel.StatusOK, pel.StatusRuntimeFailed
	std := func(export string, outputs uint32) wasmop.Params { return wasmParams(export, outputs, 4, 1<<20) }
	// A two-node program: pel.bytes.const "abc" read by the module's echo,
	// then hashed by pel.bytes.hash.asl1.
	chain := progArt(pel.Program{Nodes: []pel.Node{
		constNode(1, "abc"),
		opNode(2, wasmop.OpID, mustWasmParams(std("echo", 1)), pel.External(0), pel.FromNode(1, 0)),
		opNode(3, opreg.OpHash, nil, pel.FromNode(2, 0)),
	}, Roots: roots(2, 0, 3, 0)})
	noInputs := progArt(pel.Program{Nodes: []pel.Node{opNode(1, wasmop.OpID, mustWasmParams(std("echo", 1)))}, Roots: roots(1, 0)})
	rawParams := func(h string) *asl.Artifact {
		b, err := hex.DecodeString(h)
		if err != nil {
			panic(err)
		}
		a := progArt(pel.Program{Nodes: []pel.Node{opNode(1, wasmop.OpID, b, pel.External(0))}})
		return &a
	}
	paramsCase := func(name, desc, h string) wasmCase {
		return wasmCase{name: "params-" + name, desc: desc, module: "abi", progOnly: rawParams(h), status: pel.StatusInvalidProgram, diag: pel.DiagParamsDecode}
	}
	return []wasmCase{
		// Success and the ABI's edge cases.
		{name: "echo", desc: "copies two data inputs (one tagged) to output 0 in 7-byte reads", module: "abi", p: std("echo", 1), inputs: []asl.Artifact{hello, tagged}, status: ok},
		{name: "echo-no-inputs", desc: "no data inputs: input_count 0, output empty", module: "abi", p: std("echo", 1), status: ok},
		{name: "echo-empty-input", desc: "an empty data input: the first read returns 0", module: "abi", p: std("echo", 1), inputs: []asl.Artifact{empty}, status: ok},
		{name: "unwritten-output", desc: "an output never written is the empty artifact", module: "abi", p: std("echo", 2), inputs: []asl.Artifact{hello}, status: ok},
		{name: "zero-outputs", desc: "outputs 0: the node has no outputs", module: "abi", p: std("nothing", 0), status: ok},
		{name: "meta", desc: "input_count, input_size and input_tag (-1 untagged, the tag as u32 otherwise)", module: "abi", p: std("meta", 1), inputs: []asl.Artifact{hello, tagged, empty}, status: ok},
		{name: "read-at-end", desc: "input_read at offset = size returns 0", module: "abi", p: std("read_at_end", 1), inputs: []asl.Artifact{hello}, status: ok},
		{name: "read-at-end-empty", desc: "input_read at offset 0 of an empty input returns 0", module: "abi", p: std("read_at_end", 1), inputs: []asl.Artifact{empty}, status: ok},
		{name: "output-limit-exact", desc: "outputs totalling exactly max_output_bytes", module: "abi", p: wasmParams("echo", 1, 1, 12), inputs: []asl.Artifact{hello}, status: ok},
		{name: "nan-canonical", desc: "NaNs from f32.div, f32.add of a signalling NaN, f32.demote_f64, f64.sqrt, f64.promote_f32 are the canonical NaN; f32.neg keeps its bits", module: "abi", p: std("nan", 1), status: ok},
		{name: "nan-every-instruction", desc: "each of the 26 canonicalised instructions producing a NaN (and one ordinary result of each width)", module: "floats", p: std("run", 1), status: ok},
		{name: "wasi-clock-random", desc: "clock_time_get realtime twice, monotonic once; 40 bytes of random_get", module: "abi", p: std("wasi", 1), status: ok},
		{name: "wasi-every-function", desc: "every allowed WASI function, succeeding and failing: errnos and the memory they write", module: "wasi", p: std("run", 1), status: ok},
		{name: "memory-grow-limit", desc: "max_memory_pages 2: memory.grow(1) gives 1, memory.grow(100000) gives -1, memory.size 2", module: "abi", p: wasmParams("grow", 1, 2, 64), status: ok},
		{name: "memory-grow-none", desc: "max_memory_pages 1 = the minimum: every grow gives -1", module: "abi", p: wasmParams("grow", 1, 1, 64), status: ok},
		{name: "memory-min-at-limit", desc: "a memory minimum equal to max_memory_pages is accepted", module: "big_memory", p: wasmParams("run", 0, 3, 0), status: ok},
		{name: "initialize", desc: "_initialize runs before the entry", module: "initialize", p: std("run", 1), status: ok},
		{name: "no-memory-empty-write", desc: "a module without memory writes an empty range at 0", module: "no_memory", p: std("empty", 1), status: ok},
		{name: "chain", desc: "a kernel node feeds the module, whose output a kernel node hashes", module: "abi", progOnly: &chain, status: ok},
		// Fuel (§20.5): count10 costs exactly 11 units.
		{name: "fuel-enough", desc: "11 units (an entry and 10 loop iterations) within max_fuel 12", module: "abi", p: withFuel(std("count10", 0), 12), status: ok},
		{name: "fuel-exhausted-exact", desc: "the 11th unit with max_fuel 11 fails", module: "abi", p: withFuel(std("count10", 0), 11), status: rf, diag: pel.DiagNodeFailed},
		{name: "fuel-entry", desc: "max_fuel 1: the entry itself fails", module: "abi", p: withFuel(std("nothing", 0), 1), status: rf, diag: pel.DiagNodeFailed},
		{name: "fuel-endless-loop", desc: "an endless loop stops after 100000 units", module: "abi", p: withFuel(std("spin", 0), 100000), status: rf, diag: pel.DiagNodeFailed},
		{name: "fuel-endless-recursion", desc: "an endless recursion stops after 1000 units (before the stack limit)", module: "abi", p: withFuel(std("recurse", 0), 1000), status: rf, diag: pel.DiagNodeFailed},
		// The limits that make every engine give one result (§20.5).
		{name: "memory-65535-pages", desc: "memory.grow(65534) from 1 page reaches 65535 pages (4 GiB - 64 KiB, mapped lazily by the Go host): a store and a load at 100000 work", module: "hostile", p: wasmParams("grow", 1, 65536, 64), inputs: []asl.Artifact{u32Input(65534)}, status: ok},
		{name: "memory-65536-pages", desc: "memory.grow(65535) from 1 page would reach 65536 pages (4 GiB): -1, although max_memory_pages is 65536", module: "hostile", p: wasmParams("grow", 1, 65536, 64), inputs: []asl.Artifact{u32Input(65535)}, status: ok},
		{name: "memory-min-65536", desc: "a memory minimum of 65536 pages with max_memory_pages 65536: above the largest memory", module: "memory_65536", p: wasmParams("run", 0, 65536, 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "stack-at-limit", desc: "1474 nested calls of a one-parameter function below the entry: 64 + 1475 x 65 = 95939 stack units", module: "hostile", p: wasmParams("depth", 1, 1, 64), inputs: []asl.Artifact{u32Input(1474)}, status: ok},
		{name: "stack-over-limit", desc: "1475 nested calls: 96004 stack units, above 96000", module: "hostile", p: wasmParams("depth", 1, 1, 64), inputs: []asl.Artifact{u32Input(1475)}, status: rf, diag: pel.DiagNodeFailed},
		{name: "stack-return-at-limit", desc: "as stack-at-limit, every level leaving through return", module: "hostile", p: wasmParams("depth_return", 1, 1, 64), inputs: []asl.Artifact{u32Input(1474)}, status: ok},
		{name: "stack-return-over-limit", desc: "as stack-over-limit, every level leaving through return", module: "hostile", p: wasmParams("depth_return", 1, 1, 64), inputs: []asl.Artifact{u32Input(1475)}, status: rf, diag: pel.DiagNodeFailed},
		{name: "stack-two-results", desc: "a function of two results leaving through return and through its end (its wrapper block's type () -> (i32 i32) is appended by the Go pass)", module: "hostile", p: wasmParams("pair", 1, 1, 64), status: ok},
		{name: "stack-endless-recursion", desc: "an endless recursion with the default fuel: the stack counter stops it", module: "abi", p: std("recurse", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "table-grow-limit", desc: "one table: table.grow(2^20) gives 0, a second gives -1, table.size 2^20", module: "hostile", p: wasmParams("table_grow", 1, 1, 64), inputs: []asl.Artifact{u32Input(1 << 20)}, status: ok},
		{name: "tables-64-at-limit", desc: "64 tables, each grown by 16384 = 2^20 / 64 elements: every grow gives 0", module: "tables64", p: wasmParams("run", 1, 1, 1024), inputs: []asl.Artifact{u32Input(16384)}, status: ok},
		{name: "tables-64-over-limit", desc: "64 tables, each grown by 16385 elements: every grow gives -1", module: "tables64", p: wasmParams("run", 1, 1, 1024), inputs: []asl.Artifact{u32Input(16385)}, status: ok},
		{name: "tables-65", desc: "65 tables: one more than the limit", module: "tables65", p: wasmParams("run", 1, 1, 1024), inputs: []asl.Artifact{u32Input(1)}, status: rf, diag: pel.DiagNodeFailed},
		{name: "output-limit-stream", desc: "64 KiB writes under max_output_bytes 1 MiB: the 17th fails before it is held", module: "hostile", p: wasmParams("write", 1, 1, 1<<20), inputs: []asl.Artifact{u32Input(5120)}, status: rf, diag: pel.DiagNodeFailed},
		// Failures reported by the module.
		{name: "module-status", desc: "entry returns 7 after set_error(\"boom\")", module: "abi", p: std("fail", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "module-status-max", desc: "entry returns 65535 without a message", module: "abi", p: std("fail_silent", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "module-status-stderr", desc: "entry writes to fd 2 and returns 1: the console diagnostic", module: "abi", p: std("fail_stderr", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "return-negative", desc: "entry returns -1", module: "abi", p: std("return_negative", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "return-65536", desc: "entry returns 65536", module: "abi", p: std("return_65536", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "proc-exit", desc: "proc_exit(3)", module: "abi", p: std("exit", 0), status: rf, diag: pel.DiagNodeFailed},
		// Host call failures.
		{name: "output-limit-over", desc: "outputs one byte above max_output_bytes", module: "abi", p: wasmParams("echo", 1, 1, 11), inputs: []asl.Artifact{hello}, status: rf, diag: pel.DiagNodeFailed},
		{name: "read-past-end", desc: "input_read at offset size+1", module: "abi", p: std("read_past_end", 0), inputs: []asl.Artifact{hello}, status: rf, diag: pel.DiagNodeFailed},
		{name: "read-negative-offset", desc: "input_read at offset -1", module: "abi", p: std("read_negative_offset", 0), inputs: []asl.Artifact{hello}, status: rf, diag: pel.DiagNodeFailed},
		{name: "input-index", desc: "input_size(input_count())", module: "abi", p: std("bad_input_index", 0), inputs: []asl.Artifact{hello}, status: rf, diag: pel.DiagNodeFailed},
		{name: "input-index-none", desc: "input_size(0) without data inputs", module: "abi", p: std("read_at_end", 1), status: rf, diag: pel.DiagNodeFailed},
		{name: "read-outside-memory", desc: "input_read into [65530, 65537) of a 65536-byte memory", module: "abi", p: std("read_outside_memory", 0), inputs: []asl.Artifact{hello}, status: rf, diag: pel.DiagNodeFailed},
		{name: "output-index", desc: "output_write(1, ...) with 1 output", module: "abi", p: std("bad_output_index", 1), status: rf, diag: pel.DiagNodeFailed},
		{name: "write-outside-memory", desc: "output_write from [65535, 65537)", module: "abi", p: std("write_outside_memory", 1), status: rf, diag: pel.DiagNodeFailed},
		{name: "no-memory-write", desc: "a module without memory writes one byte", module: "no_memory", p: std("one", 1), status: rf, diag: pel.DiagNodeFailed},
		// Traps.
		{name: "trap-unreachable", module: "abi", p: std("trap_unreachable", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-divide-by-zero", module: "abi", p: std("trap_div_zero", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-integer-overflow", module: "abi", p: std("trap_overflow", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-invalid-conversion", module: "abi", p: std("trap_conversion", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-truncation-range", desc: "i32.trunc_f32_s of 3e9", module: "abi", p: std("trap_trunc_range", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-memory", module: "abi", p: std("trap_memory", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-memory-fill", desc: "memory.fill past the end", module: "abi", p: std("trap_memory_fill", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-table-get", desc: "table.get past the table", module: "abi", p: std("trap_table_get", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-table-index", desc: "call_indirect past the table", module: "abi", p: std("trap_table", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-null-element", desc: "call_indirect of a null element", module: "abi", p: std("trap_null", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "trap-signature", desc: "call_indirect with the wrong type", module: "abi", p: std("trap_signature", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "initialize-trap", desc: "_initialize traps", module: "initialize_trap", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		// Module rejections, in the order of §20.3.
		{name: "not-wasm", desc: "module bytes \"hello\"", raw: []byte("hello"), p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "empty-module", desc: "empty module bytes", raw: []byte{}, p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "truncated", desc: "the first 100 bytes of the test module", raw: testmod.MustModule("abi")[:100], p: std("echo", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "simd", desc: "a SIMD instruction", module: "simd", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "forbidden-import", desc: "import env.now", module: "forbidden_import", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "import-type", desc: "amduat.input_count imported as (i32) -> (i32)", module: "import_type", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "import-memory", desc: "a memory import", module: "import_memory", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "start", desc: "a start section", module: "start", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "memory-min-over-limit", desc: "memory minimum 3 pages, max_memory_pages 2", module: "big_memory", p: wasmParams("run", 0, 2, 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "table-too-large", desc: "a table minimum of 2^20 + 1 elements", module: "big_table", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "data-segment-bounds", desc: "an active data segment past the memory", module: "data_oob", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "element-segment-bounds", desc: "an active element segment past the table", module: "elem_oob", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "initialize-type", desc: "_initialize of type () -> (i32)", module: "initialize_type", p: std("run", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "missing-export", module: "abi", p: std("absent", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "export-not-function", desc: "the export name names the memory", module: "abi", p: std("memory", 0), status: rf, diag: pel.DiagNodeFailed},
		{name: "export-type", desc: "the entry has type (i32) -> (i32)", module: "abi", p: std("takes_param", 0), status: rf, diag: pel.DiagNodeFailed},
		// Exec_DAG's own rules for the operation.
		{name: "no-inputs", desc: "a node without inputs (at least 1: the module)", progOnly: &noInputs, status: pel.StatusInvalidProgram, diag: pel.DiagArity},
		// Params rejections (§20.2), one per rule.
		paramsCase("empty", "empty params", ""),
		paramsCase("export-empty", "export length 0", "0000"+"00000001"+"00000100"+"0000000001000000"+"0000000000000000"),
		paramsCase("export-256", "export length 256", "0100"+strings.Repeat("61", 256)+"00000001"+"00000100"+"0000000001000000"+"0000000000000000"),
		paramsCase("export-past-end", "export length 3 with 2 bytes left", "00037275"),
		paramsCase("export-utf8", "export not UTF-8", "0003ff7f7f"+"00000001"+"00000100"+"0000000001000000"+"0000000000000000"),
		paramsCase("outputs-1025", "outputs 1025", "000372756e"+"00000401"+"00000100"+"0000000001000000"+"0000000000000000"),
		paramsCase("pages-0", "max_memory_pages 0", "000372756e"+"00000001"+"00000000"+"0000000001000000"+"0000000000000000"),
		paramsCase("pages-65537", "max_memory_pages 65537", "000372756e"+"00000001"+"00010001"+"0000000001000000"+"0000000000000000"),
		paramsCase("truncated", "max_fuel of 7 bytes", "000372756e"+"00000001"+"00000100"+"0000000001000000"+"00000000000000"),
		paramsCase("old-layout", "the 21 bytes of the params without max_fuel", "000372756e"+"00000001"+"00000100"+"0000000001000000"),
		paramsCase("trailing", "one trailing byte", "000372756e"+"00000001"+"00000100"+"0000000001000000"+"0000000000000000"+"00"),
		{name: "params-limits", desc: "the largest values: 255-byte export, 1024 outputs, 65536 pages, max_output_bytes 2^64-1 (the export is missing)", module: "abi",
			p: wasmop.Params{Export: strings.Repeat("é", 127) + "x", Outputs: 1024, MaxMemoryPages: 65536, MaxOutputBytes: ^uint64(0), MaxFuel: ^uint64(0)}, status: rf, diag: pel.DiagNodeFailed},
	}
}

func genWasmRun() ([]Vector, error) {
	var l vectorList
	for _, c := range wasmCases() {
		module := c.raw
		if c.module != "" {
			module = testmod.MustModule(c.module)
		}
		inputs := append([]asl.Artifact{asl.Untagged(module)}, c.inputs...)
		var prog asl.Artifact
		if c.progOnly != nil {
			prog = *c.progOnly
			if c.module == "" {
				inputs = nil
			}
		} else {
			prog = wasmProgram(c.p, len(c.inputs))
		}
		desc := c.desc
		if desc == "" {
			desc = c.name
		}
		in, exp, err := execVector(execCase{name: c.name, desc: desc, prog: prog, inputs: inputs, status: c.status, diag: c.diag}, pel.Limits{}, RegistryKernelWasm)
		if err != nil {
			return nil, fmt.Errorf("wasm case %s: %w", c.name, err)
		}
		l.add("wasm.run."+c.name, desc, "§20", KindExecDAG, in, exp)
	}
	return l.vs, l.err
}
