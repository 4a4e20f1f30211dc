package pel_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/bench/shapes"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

var equivalencePrograms = flag.Int("equivalence-programs", 0, "random programs TestParallelEquivalence compares (0: 5000, 1000 under -race -short)")

// Test operations of the equivalence test. Each reads its params as raw
// bytes; params[0] (0 when empty) steers its behaviour.
var (
	opSpin  = opreg.OperationID{Name: "test.spin", Version: 1}   // SHA-256 of params and inputs; declared; sometimes sleeps
	opFail  = opreg.OperationID{Name: "test.fail", Version: 1}   // undeclared; fails when the input bytes are odd in number
	opBoom  = opreg.OperationID{Name: "test.boom", Version: 1}   // declared; panics when the input bytes are a multiple of 3
	opMulti = opreg.OperationID{Name: "test.multi", Version: 1}  // undeclared; params[0]%3 outputs
	opLie   = opreg.OperationID{Name: "test.lie", Version: 1}    // declares one byte more than it returns
	opSizeP = opreg.OperationID{Name: "test.sizep", Version: 1}  // its OutputSize panics
	opGlob  = opreg.OperationID{Name: "test.global", Version: 1} // SHA-256 of the global params and the inputs; declared
)

func rawParams(b []byte) (any, error) { return append([]byte(nil), b...), nil }

func inputBytes(c opreg.Call) []byte {
	var b []byte
	for _, in := range c.Inputs {
		b = append(b, in.Bytes...)
	}
	return b
}

func digestOf(c opreg.Call) []asl.Artifact {
	h := sha256.New()
	h.Write(c.Params.([]byte))
	h.Write(inputBytes(c))
	return []asl.Artifact{{Bytes: h.Sum(nil)}}
}

func flag0(c opreg.Call) byte {
	if p := c.Params.([]byte); len(p) > 0 {
		return p[0]
	}
	return 0
}

func declare32(opreg.Call) (uint64, bool) { return sha256.Size, true }

func testOp(id opreg.OperationID, run func(opreg.Call) ([]asl.Artifact, *opreg.OpError), size func(opreg.Call) (uint64, bool)) opreg.Operation {
	return opreg.Operation{ID: id, MinInputs: 0, MaxInputs: opreg.Unbounded, DecodeParams: rawParams,
		EncodeParams: func(v any) ([]byte, error) { return v.([]byte), nil }, Run: run, OutputSize: size}
}

func globalOp() opreg.Operation {
	op := testOp(opGlob, func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
		h := sha256.New()
		h.Write(c.Global.Bytes)
		h.Write(inputBytes(c))
		return []asl.Artifact{{Bytes: h.Sum(nil)}}, nil
	}, declare32)
	op.NeedsGlobalParams = true
	return op
}

// equivalenceRegistry is the kernel and the test operations.
func equivalenceRegistry(t testing.TB) *opreg.Registry {
	reg, err := opreg.Kernel().Extend(
		testOp(opSpin, func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			switch flag0(c) % 8 {
			case 0:
				time.Sleep(20 * time.Microsecond)
			case 1:
				runtime.Gosched()
			}
			return digestOf(c), nil
		}, declare32),
		testOp(opFail, func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			if len(inputBytes(c))%2 == 1 {
				if flag0(c)%2 == 0 {
					return nil, opreg.Fail(3, "reserved code from a user operation")
				}
				return nil, &opreg.OpError{StatusCode: 0x00020001 + uint32(flag0(c)), Diagnostics: []opreg.Diagnostic{{Code: 7, Message: []byte("odd")}}}
			}
			return []asl.Artifact{{Bytes: inputBytes(c)}}, nil
		}, nil),
		testOp(opBoom, func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			if len(inputBytes(c))%3 == 0 {
				panic(fmt.Sprintf("boom %d", flag0(c)))
			}
			return digestOf(c), nil
		}, declare32),
		testOp(opMulti, func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			outs := make([]asl.Artifact, flag0(c)%3)
			for i := range outs {
				outs[i] = asl.Tagged(asl.TypeTag(i+7), append(inputBytes(c), byte(i)))
			}
			return outs, nil
		}, nil),
		testOp(opLie, func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) { return digestOf(c), nil },
			func(opreg.Call) (uint64, bool) { return sha256.Size + 1, true }),
		testOp(opSizeP, func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) { return digestOf(c), nil },
			func(opreg.Call) (uint64, bool) { panic("size") }),
		globalOp(),
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// randomCase is one random program with its arguments and options.
type randomCase struct {
	program asl.Artifact
	inputs  []asl.Artifact
	params  []asl.Artifact // none or one
	opts    pel.RunOptions
	memo    bool
	stopAt  int  // the Interrupt fails before the stopAt-th node (0: never)
	stored  bool // inputs and params are ropes read from a store (ExecDAGRopes)
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// randomProgram draws a program of 1 to 40 nodes over the kernel and the
// test operations: inputs refer to earlier nodes (sometimes to an output
// index that does not exist) or to external inputs (sometimes missing),
// with random limits, a memory budget, a memo and an interrupt.
func randomProgram(t testing.TB, seed uint64) randomCase {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var c randomCase
	nIn := 1 + r.IntN(4)
	if r.IntN(8) == 0 {
		nIn = 0
	}
	for range nIn {
		c.inputs = append(c.inputs, asl.Untagged(randomBytes(r, r.IntN(48))))
	}
	if r.IntN(3) > 0 {
		c.params = []asl.Artifact{asl.Tagged(5, randomBytes(r, r.IntN(24)))}
	}
	n := 1 + r.IntN(40)
	nodes := make([]pel.Node, n)
	id := pel.NodeID(r.IntN(3))
	input := func(i int) pel.DagInput {
		if i > 0 && r.IntN(4) > 0 {
			out := uint32(0)
			if r.IntN(40) == 0 {
				out = uint32(1 + r.IntN(2))
			}
			return pel.FromNode(nodes[r.IntN(i)].ID, out)
		}
		ext := r.IntN(len(c.inputs) + 1)
		if r.IntN(20) > 0 && len(c.inputs) > 0 {
			ext = r.IntN(len(c.inputs))
		}
		return pel.External(uint32(ext))
	}
	inputsOf := func(i, k int) []pel.DagInput {
		ins := make([]pel.DagInput, k)
		for j := range ins {
			ins[j] = input(i)
		}
		return ins
	}
	for i := range nodes {
		id += pel.NodeID(1 + r.IntN(2))
		nd := pel.Node{ID: id, Params: []byte{}}
		switch w := r.IntN(200); {
		case w < 20:
			nd.Op = opreg.OpConst
			cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: randomBytes(r, r.IntN(16))})
			if err != nil {
				t.Fatal(err)
			}
			nd.Params = cp
		case w < 50:
			nd.Op, nd.Inputs = opreg.OpConcat, inputsOf(i, 1+r.IntN(4))
		case w < 66:
			nd.Op, nd.Inputs = opreg.OpSlice, inputsOf(i, 1)
			nd.Params = opreg.EncodeSliceParams(opreg.SliceParams{Offset: uint64(r.IntN(8)), Length: uint64(r.IntN(24))})
		case w < 100:
			nd.Op, nd.Inputs = opreg.OpHash, inputsOf(i, 1)
		case w < 106:
			nd.Op = opreg.OpParams
		case w < 166:
			nd.Op, nd.Inputs, nd.Params = opSpin, inputsOf(i, r.IntN(4)), randomBytes(r, r.IntN(3))
		case w < 176:
			nd.Op, nd.Inputs = opGlob, inputsOf(i, r.IntN(3))
		case w < 184:
			nd.Op, nd.Inputs, nd.Params = opFail, inputsOf(i, 1+r.IntN(3)), randomBytes(r, 1)
		case w < 190:
			nd.Op, nd.Inputs, nd.Params = opBoom, inputsOf(i, 1+r.IntN(3)), randomBytes(r, 1)
		case w < 197:
			nd.Op, nd.Inputs, nd.Params = opMulti, inputsOf(i, r.IntN(3)), randomBytes(r, 1)
		case w < 199:
			nd.Op, nd.Inputs = opLie, inputsOf(i, r.IntN(2))
		default:
			nd.Op, nd.Inputs = opSizeP, inputsOf(i, r.IntN(2))
		}
		nodes[i] = nd
	}
	var roots []pel.RootRef
	for range 1 + r.IntN(3) {
		out := uint32(0)
		if r.IntN(10) == 0 {
			out = 1
		}
		roots = append(roots, pel.RootRef{NodeID: nodes[r.IntN(n)].ID, OutputIndex: out})
	}
	c.program = mustArtifact(t, pel.Program{Nodes: nodes, Roots: roots})
	if r.IntN(4) == 0 {
		c.opts.Limits.MaxNodes = uint64(1 + r.IntN(n))
	}
	if r.IntN(4) == 0 {
		c.opts.Limits.MaxOutputBytes = uint64(r.IntN(64 * n))
	}
	if r.IntN(4) == 0 {
		c.opts.MemoryBudget = uint64(r.IntN(48 * n))
	}
	c.stored = r.IntN(3) == 0
	c.memo = !c.stored && r.IntN(5) == 0
	if r.IntN(8) == 0 {
		c.stopAt = 1 + r.IntN(n)
	}
	c.opts.Workers = 2 + r.IntN(3)
	return c
}

// outcome is everything observable about one run.
type outcome struct {
	outputs []asl.Artifact
	result  []byte
	events  []pel.NodeEvent
	err     string
}

var errStop = errors.New("interrupted by the test")

func (c randomCase) run(t testing.TB, reg *opreg.Registry, workers int) outcome {
	var o outcome
	opts := c.opts
	opts.Workers = workers
	if c.memo {
		opts.Memo = &mapMemo{m: map[string][]asl.Artifact{}}
	}
	if c.stopAt > 0 {
		n := 0
		opts.Interrupt = func() error {
			if n++; n == c.stopAt {
				return errStop
			}
			return nil
		}
	}
	obs := pel.ObserverFunc(func(e pel.NodeEvent) {
		e.Outputs = append([]asl.Artifact(nil), e.Outputs...)
		for _, v := range e.Values {
			e.Outputs = append(e.Outputs, readRope(t, v))
		}
		e.Values = nil
		o.events = append(o.events, e)
	})
	var outs []asl.Artifact
	var res pel.ExecutionResultValue
	var err error
	if c.stored {
		var ropes []*asl.Rope
		ropes, opts.RopeMemo = storedRopes(t, slices.Concat(c.inputs, c.params)), nil
		var global *asl.Rope
		if c.params != nil {
			ropes, global = ropes[:len(ropes)-1], ropes[len(ropes)-1]
		}
		var routs []*asl.Rope
		routs, res, err = pel.ExecDAGRopes(reg, c.program, ropes, global, obs, opts)
		for _, r := range routs {
			outs = append(outs, readRope(t, r))
		}
	} else {
		var params *asl.Artifact
		if c.params != nil {
			params = &c.params[0]
		}
		outs, res, err = pel.ExecDAGWith(reg, c.program, c.inputs, params, obs, opts)
	}
	o.outputs = outs
	if err != nil {
		o.err = err.Error()
		if res.PEL1Version != 0 || outs != nil {
			t.Fatalf("error %v together with a result or outputs", err)
		}
		return o
	}
	b, eerr := pel.EncodeResultValue(res)
	if eerr != nil {
		t.Fatalf("result does not encode: %v", eerr)
	}
	o.result = b
	return o
}

// storedRopes puts the artifacts in a fresh memory store and returns ropes
// reading them from it.
func storedRopes(t testing.TB, arts []asl.Artifact) []*asl.Rope {
	st := memstore.New()
	ropes := make([]*asl.Rope, len(arts))
	for k, a := range arts {
		ref, err := asl.PutArtifact(context.Background(), st, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		ropes[k] = asl.StoredRope(st, ref, a.Header())
	}
	return ropes
}

func readRope(t testing.TB, r *asl.Rope) asl.Artifact {
	a, err := r.Artifact(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (o outcome) diff(p outcome) string {
	switch {
	case o.err != p.err:
		return fmt.Sprintf("error %q, parallel %q", o.err, p.err)
	case !bytes.Equal(o.result, p.result):
		return fmt.Sprintf("result %x, parallel %x", o.result, p.result)
	case !reflect.DeepEqual(o.outputs, p.outputs):
		return fmt.Sprintf("outputs %v, parallel %v", o.outputs, p.outputs)
	case !reflect.DeepEqual(o.events, p.events):
		return fmt.Sprintf("%d events, parallel %d: %v\nparallel %v", len(o.events), len(p.events), o.events, p.events)
	}
	return ""
}

// TestParallelEquivalence runs thousands of random programs (kernel
// operations and test operations that fail, panic, lie about their size
// or sleep; missing inputs, bad output indices, random limits, memory
// budgets, memo and interrupts) sequentially and with 2 to 4 workers, and
// requires identical outputs, result bytes, observer events (the trace)
// and errors. Every speculable node is speculated (no size threshold).
// Under -race the default run (and -short) takes 1,000 programs, AMDUAT_LONG=1
// (internal/longtest) the 5,000 of a run without -race.
func TestParallelEquivalence(t *testing.T) {
	// Sequential: it sets the package-wide speculation threshold and test hook.
	n := *equivalencePrograms
	if n == 0 {
		n = 5000
		if raceEnabled && (testing.Short() || !longtest.Enabled()) {
			n = 1000
		}
	}
	defer pel.SetSpecMinHashBytes(0)()
	var total pel.SpecStats
	defer pel.SetSpecTestHook(func(s pel.SpecStats) {
		total.Dispatched += s.Dispatched
		total.Taken += s.Taken
		total.Dropped += s.Dropped
		total.Inline += s.Inline
	})()
	reg := equivalenceRegistry(t)
	statuses := map[string]int{}
	for seed := range uint64(n) {
		c := randomProgram(t, seed)
		seq := c.run(t, reg, 1)
		par := c.run(t, reg, c.opts.Workers)
		if d := seq.diff(par); d != "" {
			t.Fatalf("seed %d, %d workers: %s", seed, c.opts.Workers, d)
		}
		switch {
		case seq.err != "":
			statuses["error"]++
		default:
			v, _ := pel.DecodeResultValue(seq.result)
			statuses[v.Status.String()]++
		}
	}
	t.Logf("%d programs: %v; speculation: %+v", n, statuses, total)
	// The programs must exercise every outcome and speculation must really
	// happen, be used, and be thrown away.
	for _, s := range []string{"OK", "INVALID_PROGRAM", "INVALID_INPUTS", "RUNTIME_FAILED", "error"} {
		if statuses[s] == 0 {
			t.Errorf("no program ended with %s", s)
		}
	}
	if total.Taken == 0 || total.Dropped == 0 || total.Dispatched < n {
		t.Errorf("speculation barely happened: %+v", total)
	}
}

// FuzzParallelEquivalence is TestParallelEquivalence over fuzzed seeds.
func FuzzParallelEquivalence(f *testing.F) {
	for _, s := range []uint64{0, 1, 2, 1 << 40} {
		f.Add(s)
	}
	reg := equivalenceRegistry(f)
	f.Fuzz(func(t *testing.T, seed uint64) {
		defer pel.SetSpecMinHashBytes(0)()
		c := randomProgram(t, seed)
		if d := c.run(t, reg, 1).diff(c.run(t, reg, c.opts.Workers)); d != "" {
			t.Fatalf("seed %d, %d workers: %s", seed, c.opts.Workers, d)
		}
	})
}

// countingOp is a user operation with a declared output of size bytes
// that counts its Run calls.
func countingOp(size int, calls *atomic.Int64) opreg.Operation {
	return testOp(opSpin, func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
		calls.Add(1)
		time.Sleep(time.Millisecond) // long enough for the workers to take any job they were given
		return []asl.Artifact{{Bytes: make([]byte, size)}}, nil
	}, func(opreg.Call) (uint64, bool) { return uint64(size), true })
}

// wideRoots is n independent test.spin nodes, all roots (so their outputs
// are held to the end).
func wideRoots(t testing.TB, n int) asl.Artifact {
	nodes := make([]pel.Node, n)
	roots := make([]pel.RootRef, n)
	for i := range nodes {
		nodes[i] = pel.Node{ID: pel.NodeID(i + 1), Op: opSpin, Params: []byte{byte(i)}}
		roots[i] = pel.RootRef{NodeID: pel.NodeID(i + 1)}
	}
	return mustArtifact(t, pel.Program{Nodes: nodes, Roots: roots})
}

// TestParallelRespectsBounds: speculation never runs an operation the
// sequential evaluation would not have run because of a node limit, an
// output-bytes limit or the memory budget, so a hostile program allocates
// no more with workers than without.
func TestParallelRespectsBounds(t *testing.T) {
	t.Parallel()
	const size = 1 << 10
	tests := []struct {
		name string
		opts pel.RunOptions
	}{
		{"max nodes", pel.RunOptions{Limits: pel.Limits{MaxNodes: 4}}},
		{"max output bytes", pel.RunOptions{Limits: pel.Limits{MaxOutputBytes: 4*size + size/2}}},
		{"memory budget", pel.RunOptions{MemoryBudget: 4*size + size/2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			reg := extendedRegistry(t, countingOp(size, &calls))
			prog := wideRoots(t, 64)
			for _, workers := range []int{1, 4} {
				calls.Store(0)
				opts := tt.opts
				opts.Workers = workers
				_, res, err := pel.ExecDAGWith(reg, prog, nil, nil, nil, opts)
				if err == nil && res.Status == pel.StatusOK {
					t.Fatalf("%d workers: the bound did not stop the run", workers)
				}
				if got := calls.Load(); got != 4 {
					t.Errorf("%d workers: %d operation calls, want the 4 the sequential evaluation makes", workers, got)
				}
			}
		})
	}
}

// TestParallelFailureAtCanonicalPosition: a speculated node that panics
// after a node that fails is never reported, and a speculated panic is
// reported exactly at its canonical position.
func TestParallelFailureAtCanonicalPosition(t *testing.T) {
	// Sequential: it sets the package-wide speculation threshold.
	defer pel.SetSpecMinHashBytes(0)()
	reg := equivalenceRegistry(t)
	spin := func(id pel.NodeID) pel.Node {
		return pel.Node{ID: id, Op: opSpin, Inputs: []pel.DagInput{pel.External(0)}, Params: []byte{0}}
	}
	boom := pel.Node{ID: 9, Op: opBoom, Inputs: []pel.DagInput{pel.External(1)}, Params: []byte{}}  // 3 input bytes: panics
	fail := pel.Node{ID: 3, Op: opFail, Inputs: []pel.DagInput{pel.External(2)}, Params: []byte{1}} // 1 input byte: fails
	inputs := []asl.Artifact{asl.Untagged([]byte("in")), asl.Untagged([]byte("abc")), asl.Untagged([]byte("x"))}
	t.Run("failure first", func(t *testing.T) {
		prog := mustArtifact(t, pel.Program{Nodes: []pel.Node{spin(1), spin(2), fail, spin(4), boom}, Roots: root(9)})
		for _, w := range []int{1, 2, 8} {
			_, res, err := pel.ExecDAGWith(reg, prog, inputs, nil, nil, pel.RunOptions{Workers: w})
			if err != nil || res.Status != pel.StatusRuntimeFailed || res.Summary.StatusCode != 0x00020002 {
				t.Fatalf("%d workers: %v %s 0x%08x, want RUNTIME_FAILED 0x00020002 at node 3", w, err, res.Status, res.Summary.StatusCode)
			}
		}
	})
	t.Run("panic first", func(t *testing.T) {
		fail.ID, boom.ID = 9, 3
		prog := mustArtifact(t, pel.Program{Nodes: []pel.Node{spin(1), spin(2), boom, spin(4), fail}, Roots: root(9)})
		for _, w := range []int{1, 2, 8} {
			_, _, err := pel.ExecDAGWith(reg, prog, inputs, nil, nil, pel.RunOptions{Workers: w})
			var ie *pel.InternalError
			if !errors.As(err, &ie) || ie.NodeID != 3 || ie.Phase != "run" {
				t.Fatalf("%d workers: %v, want the internal failure of node 3", w, err)
			}
		}
	})
}

// wideHash is shapes.WideHash(n) (n hash nodes, node i hashing input
// i, and a concat of the digests) with n distinct inputs of size bytes.
func wideHash(t testing.TB, n, size int) (asl.Artifact, []asl.Artifact) {
	inputs := make([]asl.Artifact, n)
	for i := range inputs {
		b := make([]byte, size)
		binary.LittleEndian.PutUint64(b, uint64(i))
		inputs[i] = asl.Untagged(b)
	}
	return mustArtifact(t, shapes.WideHash(n)), inputs
}

// TestParallelWideHash: the 64 hash nodes give the same root with any
// number of workers.
func TestParallelWideHash(t *testing.T) {
	t.Parallel()
	prog, inputs := wideHash(t, 64, 128<<10)
	want, res, err := pel.ExecDAGWith(nil, prog, inputs, nil, nil, pel.RunOptions{})
	if err != nil || res.Status != pel.StatusOK {
		t.Fatal(err, res.Status)
	}
	for _, w := range []int{2, 3, 16} {
		got, res, err := pel.ExecDAGWith(nil, prog, inputs, nil, nil, pel.RunOptions{Workers: w})
		if err != nil || res.Status != pel.StatusOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("%d workers: %v %s, outputs differ: %v", w, err, res.Status, !reflect.DeepEqual(got, want))
		}
	}
}

// BenchmarkParallelWide: 64 pel.bytes.hash.asl1 nodes over distinct 1 MiB
// inputs, sequential against 2 and 4 workers.
func BenchmarkParallelWide(b *testing.B) {
	prog, inputs := wideHash(b, 64, 1<<20)
	for _, w := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers-%d", w), func(b *testing.B) {
			b.SetBytes(64 << 20)
			for b.Loop() {
				if _, res, err := pel.ExecDAGWith(nil, prog, inputs, nil, nil, pel.RunOptions{Workers: w}); err != nil || res.Status != pel.StatusOK {
					b.Fatal(err, res.Status)
				}
			}
		})
	}
}

// BenchmarkParallelThreshold measures where speculating a hash node starts
// to pay: 64 hash nodes over inputs of each size, sequential and with 2
// workers, every hash speculated.
func BenchmarkParallelThreshold(b *testing.B) {
	defer pel.SetSpecMinHashBytes(0)()
	for _, size := range []int{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10} {
		prog, inputs := wideHash(b, 64, size)
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("size-%d/workers-%d", size, w), func(b *testing.B) {
				b.SetBytes(int64(64 * size))
				for b.Loop() {
					if _, res, err := pel.ExecDAGWith(nil, prog, inputs, nil, nil, pel.RunOptions{Workers: w}); err != nil || res.Status != pel.StatusOK {
						b.Fatal(err, res.Status)
					}
				}
			})
		}
	}
}

// BenchmarkParallelOverhead is the cost of the speculator where it has
// nothing to gain: a chain of 10,000 hash nodes (each hashing the previous
// digest), sequential against 2 workers.
func BenchmarkParallelOverhead(b *testing.B) {
	const n = 10_000
	nodes := make([]pel.Node, n)
	nodes[0] = constNode(b, 1, "x")
	for i := 1; i < n; i++ {
		nodes[i] = hashNode(pel.NodeID(i+1), pel.FromNode(pel.NodeID(i), 0))
	}
	pl, err := pel.Prepare(pel.Program{Nodes: nodes, Roots: root(n)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers-%d", w), func(b *testing.B) {
			for b.Loop() {
				if _, res, err := pl.RunWith(nil, nil, nil, pel.RunOptions{Workers: w}); err != nil || res.Status != pel.StatusOK {
					b.Fatal(err, res.Status)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
		})
	}
}
