package wasmop_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/testmod"
)

// engines are the two runtimes every test runs under: the determinism
// proof demands identical outcomes from both.
type engines struct {
	names []string
	regs  []*opreg.Registry
	engs  []*wasmop.Engine
}

func newEngines(t testing.TB, opts wasmop.Options) *engines {
	t.Helper()
	es := &engines{}
	for _, interp := range []bool{false, true} {
		o := opts
		o.Interpreter = interp
		if o.CacheDir == "" && !interp {
			o.CacheDir = compCacheDir
		}
		e, err := wasmop.New(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(context.Background()) })
		reg, err := wasmop.Extend(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		name := "compiler"
		if interp {
			name = "interpreter"
		}
		es.names = append(es.names, name)
		es.regs = append(es.regs, reg)
		es.engs = append(es.engs, e)
	}
	return es
}

// outcome is everything a run yields, rendered for comparison.
type outcome struct {
	status  pel.ExecutionStatus
	code    uint32
	outputs []string // hex
	diags   []string // "code:message"
	text    string   // result value and trace bytes, hex
	err     error
}

func (o outcome) String() string {
	return fmt.Sprintf("status=%v code=0x%08x outputs=%v diags=%q err=%v", o.status, o.code, o.outputs, o.diags, o.err)
}

// runOp runs one amduat.wasm.run node through pel.ExecDAGWith and builds
// its trace.
func runOp(t testing.TB, reg *opreg.Registry, module []byte, p wasmop.Params, inputs ...asl.Artifact) outcome {
	t.Helper()
	pa, all := oneNode(t, module, p, inputs...)
	return runProgram(t, reg, pa, all)
}

// oneNode is the program of one amduat.wasm.run node on program inputs
// 0 (the module) … n, all its outputs roots, and those inputs.
func oneNode(t testing.TB, module []byte, p wasmop.Params, inputs ...asl.Artifact) (asl.Artifact, []asl.Artifact) {
	t.Helper()
	pb, err := wasmop.EncodeParams(p)
	if err != nil {
		t.Fatal(err)
	}
	node := pel.Node{ID: 1, Op: wasmop.OpID, Params: pb}
	all := append([]asl.Artifact{asl.Untagged(module)}, inputs...)
	for i := range all {
		node.Inputs = append(node.Inputs, pel.External(uint32(i)))
	}
	prog := pel.Program{Nodes: []pel.Node{node}}
	for i := range p.Outputs {
		prog.Roots = append(prog.Roots, pel.RootRef{NodeID: 1, OutputIndex: i})
	}
	pa, err := pel.ProgramArtifact(prog)
	if err != nil {
		t.Fatal(err)
	}
	return pa, all
}

// runProgram runs the program pa on inputs all through pel.ExecDAGWith and
// builds its trace.
func runProgram(t testing.TB, reg *opreg.Registry, pa asl.Artifact, all []asl.Artifact) outcome {
	t.Helper()
	tb, err := trace.NewBuilder(asl.HashSHA256)
	if err != nil {
		t.Fatal(err)
	}
	outs, res, err := pel.ExecDAGWith(reg, pa, all, nil, tb, pel.RunOptions{})
	if err != nil {
		return outcome{err: err}
	}
	o := outcome{status: res.Status, code: res.Summary.StatusCode}
	for _, a := range outs {
		o.outputs = append(o.outputs, hex.EncodeToString(a.Bytes))
	}
	for _, d := range res.Diagnostics {
		o.diags = append(o.diags, fmt.Sprintf("0x%08x:%s", d.Code, d.Message))
	}
	rb, err := pel.EncodeResultValue(res)
	if err != nil {
		t.Fatal(err)
	}
	links := trace.Links{ProgramRef: asl.MustDerive(asl.HashSHA256, pa)}
	for _, a := range all {
		links.InputRefs = append(links.InputRefs, asl.MustDerive(asl.HashSHA256, a))
	}
	links.ExecResultRef = asl.MustDerive(asl.HashSHA256, asl.Untagged(rb))
	tr, err := tb.Finish(links, res)
	if err != nil {
		t.Fatal(err)
	}
	trb, err := trace.Encode(tr)
	if err != nil {
		t.Fatal(err)
	}
	o.text = hex.EncodeToString(rb) + "/" + hex.EncodeToString(trb)
	return o
}

// runBoth runs under the compiler and the interpreter and demands identical
// outcomes (outputs, result and trace bytes; for an internal failure, the
// same kind of error).
func (es *engines) runBoth(t testing.TB, module []byte, p wasmop.Params, inputs ...asl.Artifact) outcome {
	t.Helper()
	var first outcome
	for i, reg := range es.regs {
		o := runOp(t, reg, module, p, inputs...)
		if i == 0 {
			first = o
			continue
		}
		same := o.text == first.text && o.String() == first.String()
		if o.err != nil || first.err != nil {
			same = errors.Is(o.err, wasmop.ErrOperational) == errors.Is(first.err, wasmop.ErrOperational) && (o.err == nil) == (first.err == nil)
		}
		if !same {
			t.Fatalf("%s and %s differ:\n%s\n%s", es.names[0], es.names[i], first, o)
		}
	}
	return first
}

func params(export string, outputs uint32) wasmop.Params {
	return wasmop.Params{Export: export, Outputs: outputs, MaxMemoryPages: 4, MaxOutputBytes: 1 << 20}
}

func fuel(export string, units uint64) wasmop.Params {
	p := params(export, 0)
	p.MaxFuel = units
	return p
}

func u32le(vs ...uint32) string {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return hex.EncodeToString(b)
}

func u64le(vs ...uint64) string {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return hex.EncodeToString(b)
}

func hexs(s string) string { return hex.EncodeToString([]byte(s)) }

func TestABI(t *testing.T) {
	es := newEngines(t, wasmop.Options{})
	abi := testmod.MustModule("abi")
	hello, tagged, empty := asl.Untagged([]byte("hello, world")), asl.Tagged(0xfffffffe, []byte("xyz")), asl.Untagged(nil)
	ok := func(outs ...string) outcome { return outcome{status: pel.StatusOK, outputs: outs} }
	failed := func(code uint32, msg string) outcome {
		return outcome{status: pel.StatusRuntimeFailed, code: code, diags: []string{pelDiag(code), fmt.Sprintf("0x%08x:%s", code, msg)}}
	}
	for _, tc := range []struct {
		name   string
		p      wasmop.Params
		inputs []asl.Artifact
		want   outcome
	}{
		{"echo", params("echo", 1), []asl.Artifact{hello, tagged}, ok(hexs("hello, worldxyz"))},
		{"echo no inputs", params("echo", 1), nil, ok("")},
		{"echo empty input", params("echo", 1), []asl.Artifact{empty}, ok("")},
		{"echo two outputs, one unwritten", params("echo", 2), []asl.Artifact{hello}, ok(hexs("hello, world"), "")},
		{"output limit exactly reached", wasmop.Params{Export: "echo", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 12}, []asl.Artifact{hello}, ok(hexs("hello, world"))},
		{"output limit one byte over", wasmop.Params{Export: "echo", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 11}, []asl.Artifact{hello},
			failed(wasmop.StatusOutputLimit, "output_write: 7 + 5 output bytes exceed max_output_bytes 11")},
		{"meta", params("meta", 1), []asl.Artifact{hello, tagged, empty},
			ok(u32le(3) + u64le(12, ^uint64(0)) + u64le(3, 0xfffffffe) + u64le(0, ^uint64(0)))},
		{"zero outputs", params("nothing", 0), nil, ok()},
		{"read at end", params("read_at_end", 1), []asl.Artifact{hello}, ok(u32le(0))},
		{"read at end of empty input", params("read_at_end", 1), []asl.Artifact{empty}, ok(u32le(0))},
		{"read past end", params("read_past_end", 0), []asl.Artifact{hello},
			failed(wasmop.StatusInputOffset, "input_read: offset 13 is outside input 0 of 12 bytes")},
		{"read negative offset", params("read_negative_offset", 0), []asl.Artifact{hello},
			failed(wasmop.StatusInputOffset, "input_read: offset -1 is outside input 0 of 12 bytes")},
		{"bad input index", params("bad_input_index", 0), []asl.Artifact{hello},
			failed(wasmop.StatusInputIndex, "input_size: input 1 out of range (1 data inputs)")},
		{"read without inputs", params("read_at_end", 1), nil,
			failed(wasmop.StatusInputIndex, "input_size: input 0 out of range (0 data inputs)")},
		{"read outside memory", params("read_outside_memory", 0), []asl.Artifact{hello},
			failed(wasmop.StatusMemoryRange, "input_read: memory range [65530, 65537) is outside the memory of 65536 bytes")},
		{"bad output index", params("bad_output_index", 1), nil,
			failed(wasmop.StatusOutputIndex, "output_write: output 1 out of range (1 outputs)")},
		{"write outside memory", params("write_outside_memory", 1), nil,
			failed(wasmop.StatusMemoryRange, "output_write: memory range [65535, 65537) is outside the memory of 65536 bytes")},
		{"module failure with message", params("fail", 0), nil, failed(wasmop.ModuleCodeBase|7, "boom")},
		{"module failure without message", params("fail_silent", 0), nil, failed(wasmop.ModuleCodeBase|65535, "module failed with status 65535")},
		{"module failure with stderr", params("fail_stderr", 0), nil, outcome{status: pel.StatusRuntimeFailed, code: wasmop.ModuleCodeBase | 1,
			diags: []string{pelDiag(0x01000001), "0x01000001:module failed with status 1", "0x01020000:to stderr\n"}}},
		{"return negative", params("return_negative", 0), nil, failed(wasmop.StatusBadReturn, "entry returned -1, want 0 to 65535")},
		{"return 65536", params("return_65536", 0), nil, failed(wasmop.StatusBadReturn, "entry returned 65536, want 0 to 65535")},
		{"proc_exit", params("exit", 0), nil, failed(wasmop.StatusProcExit, "proc_exit(3)")},
		{"trap unreachable", params("trap_unreachable", 0), nil, failed(wasmop.StatusTrapUnreachable, "trap: unreachable")},
		{"trap divide by zero", params("trap_div_zero", 0), nil, failed(wasmop.StatusTrapDivideByZero, "trap: integer divide by zero")},
		{"trap overflow", params("trap_overflow", 0), nil, failed(wasmop.StatusTrapIntegerOverflow, "trap: integer overflow")},
		{"trap conversion", params("trap_conversion", 0), nil, failed(wasmop.StatusTrapInvalidConversion, "trap: invalid conversion to integer")},
		{"trap truncation out of range", params("trap_trunc_range", 0), nil, failed(wasmop.StatusTrapIntegerOverflow, "trap: integer overflow")},
		{"trap memory", params("trap_memory", 0), nil, failed(wasmop.StatusTrapMemoryOutOfBounds, "trap: out of bounds memory access")},
		{"trap memory.fill", params("trap_memory_fill", 0), nil, failed(wasmop.StatusTrapMemoryOutOfBounds, "trap: out of bounds memory access")},
		{"trap table.get", params("trap_table_get", 0), nil, failed(wasmop.StatusTrapTableOutOfBounds, "trap: invalid table access")},
		{"trap table index", params("trap_table", 0), nil, failed(wasmop.StatusTrapTableOutOfBounds, "trap: invalid table access")},
		{"trap null element", params("trap_null", 0), nil, failed(wasmop.StatusTrapTableOutOfBounds, "trap: invalid table access")},
		{"trap signature", params("trap_signature", 0), nil, failed(wasmop.StatusTrapIndirectCallType, "trap: indirect call type mismatch")},
		{"memory grows to the limit, not beyond", wasmop.Params{Export: "grow", Outputs: 1, MaxMemoryPages: 2, MaxOutputBytes: 64}, nil,
			ok(u32le(1, 0xffffffff, 2))},
		{"memory limit at the minimum", wasmop.Params{Export: "grow", Outputs: 1, MaxMemoryPages: 1, MaxOutputBytes: 64}, nil,
			ok(u32le(0xffffffff, 0xffffffff, 1))},
		{"NaN canonicalisation", params("nan", 1), nil,
			ok(u32le(0x7fc00000, 0x7fc00000, 0x7fc00000) + u64le(0x7ff8000000000000, 0x7ff8000000000000) + u32le(0xffa00001))},
		{"wasi clocks and random", params("wasi", 1), nil,
			ok(u64le(wasmop.RealtimeBase, wasmop.RealtimeBase+wasmop.ClockStep, 2*wasmop.ClockStep) + randomHex(40))},
		{"fuel: 11 units within 12", fuel("count10", 12), nil, ok()},
		{"fuel: the 11th unit of 11 fails", fuel("count10", 11), nil, failed(wasmop.StatusFuelExhausted, "fuel exhausted: the call used all its 11 units")},
		{"fuel: entry alone", fuel("nothing", 1), nil, failed(wasmop.StatusFuelExhausted, "fuel exhausted: the call used all its 1 units")},
		{"fuel: endless loop", fuel("spin", 100000), nil, failed(wasmop.StatusFuelExhausted, "fuel exhausted: the call used all its 100000 units")},
		{"fuel: endless recursion", fuel("recurse", 1000), nil, failed(wasmop.StatusFuelExhausted, "fuel exhausted: the call used all its 1000 units")},
		{"stack: endless recursion", params("recurse", 0), nil, failed(wasmop.StatusStackExhausted, "stack exhausted: the calls in progress would use more than 96000 units")},
		{"missing export", params("absent", 0), nil, failed(wasmop.StatusMissingExport, `no function export named "absent"`)},
		{"export is not a function", params("memory", 0), nil, failed(wasmop.StatusMissingExport, `no function export named "memory"`)},
		{"export of the wrong type", params("takes_param", 0), nil, failed(wasmop.StatusExportType, `export "takes_param" has type (i32) -> (i32), want () -> (i32)`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := es.runBoth(t, abi, tc.p, tc.inputs...)
			got.text, tc.want.text = "", ""
			if got.String() != tc.want.String() {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// pelDiag is the diagnostic Exec_DAG puts before an operation's own.
func pelDiag(code uint32) string {
	return fmt.Sprintf("0x00000010:node 1: operation amduat.wasm.run version 1 failed with status code 0x%08x", code)
}

// randomHex is the first n bytes of the random_get stream, computed here
// from the specification (SPECS.md §20.6).
func randomHex(n int) string {
	var out []byte
	for k := uint64(0); len(out) < n; k++ {
		out = append(out, sha256Sum(append([]byte(wasmop.RandomSeed), binary.BigEndian.AppendUint64(nil, k)...))...)
	}
	return hex.EncodeToString(out[:n])
}

func TestOperationalFailures(t *testing.T) {
	es := newEngines(t, wasmop.Options{CallTimeout: 300 * time.Millisecond})
	abi := testmod.MustModule("abi")
	// An endless recursion is no longer operational: the stack counter
	// stops it on both engines (TestABI, "stack: endless recursion").
	for _, tc := range []struct{ export, reason string }{
		{"spin", "time bound"},
	} {
		t.Run(tc.export, func(t *testing.T) {
			for i, reg := range es.regs {
				o := runOp(t, reg, abi, params(tc.export, 0))
				if !errors.Is(o.err, wasmop.ErrOperational) || !errors.Is(o.err, pel.ErrInternal) || !strings.Contains(o.err.Error(), tc.reason) {
					t.Errorf("%s: got %v, want an operational failure (%s)", es.names[i], o, tc.reason)
				}
			}
		})
	}
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
