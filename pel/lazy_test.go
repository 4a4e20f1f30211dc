package pel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/internal/progtest"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// materialisingKernel is the kernel under the names "test.pel.bytes.*",
// without RunRope: Exec_DAG reads every input into memory and runs the
// byte-slice operations, as it did before ropes.
func materialisingKernel(t testing.TB) *opreg.Registry {
	t.Helper()
	var ops []opreg.Operation
	for _, id := range opreg.Kernel().IDs() {
		op, _ := opreg.Kernel().Lookup(id)
		c := *op
		c.ID.Name = "test." + id.Name
		c.RunRope, c.SizeRope = nil, nil
		ops = append(ops, c)
	}
	reg, err := opreg.Kernel().Extend(ops...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func renamed(p pel.Program) pel.Program {
	q := pel.Program{Nodes: make([]pel.Node, len(p.Nodes)), Roots: p.Roots}
	for i, n := range p.Nodes {
		n.Op.Name = "test." + n.Op.Name
		q.Nodes[i] = n
	}
	return q
}

// eventText renders events with their outputs' bytes, operation names
// without the test prefix.
func eventText(evs []pel.NodeEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d %s %d %d [", e.NodeID, strings.TrimPrefix(e.Op.Name, "test."), e.Status, e.StatusCode)
		for _, o := range e.Outputs {
			fmt.Fprintf(&b, "%x/%t/%x ", o.Tag, o.HasTag, o.Bytes)
		}
		for _, d := range e.Diagnostics {
			fmt.Fprintf(&b, "(%d %s)", d.Code, strings.ReplaceAll(string(d.Message), "test.pel.", "pel."))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func resultText(outs []asl.Artifact, res pel.ExecutionResultValue) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d\n", res.Status, res.Summary.Kind, res.Summary.StatusCode)
	for _, d := range res.Diagnostics {
		fmt.Fprintf(&b, "(%d %s)", d.Code, strings.ReplaceAll(string(d.Message), "test.pel.", "pel."))
	}
	for _, o := range outs {
		fmt.Fprintf(&b, "%x/%t/%x\n", o.Tag, o.HasTag, o.Bytes)
	}
	return b.String()
}

// TestRopesMatchMaterialised runs random programs three ways and requires
// identical results, outputs and node events: the kernel on byte slices
// (RunRope removed), the kernel on in-memory ropes (RunWith), and the
// kernel on store-backed ropes (RunRopes over a memstore), with and without
// an output-bytes limit. The default run draws 500 programs;
// AMDUAT_LONG=1 (internal/longtest) 1,500.
func TestRopesMatchMaterialised(t *testing.T) {
	t.Parallel()
	n := longtest.Logf(t, "random programs", 500, 1500)
	if testing.Short() {
		n = 200
	}
	ctx := context.Background()
	mat := materialisingKernel(t)
	r := rand.New(rand.NewPCG(13, 0))
	st := memstore.New()
	sawFail, sawOK := 0, 0
	for i := 0; i < n; i++ {
		shape := progtest.Shape{MaxNodes: 12, HasParams: r.IntN(2) == 0}
		var inputs []asl.Artifact
		var ropes []*asl.Rope
		for k := r.IntN(4); k > 0; k-- {
			b := make([]byte, r.IntN(300))
			for j := range b {
				b[j] = byte(r.Uint32())
			}
			a := asl.Artifact{Bytes: b}
			if r.IntN(3) == 0 {
				a = asl.Tagged(7, b)
			}
			inputs = append(inputs, a)
			shape.InputSizes = append(shape.InputSizes, uint64(len(b)))
			ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
			if err != nil {
				t.Fatal(err)
			}
			ropes = append(ropes, asl.StoredRope(st, ref, a.Header()))
		}
		var params *asl.Artifact
		var global *asl.Rope
		if shape.HasParams {
			params = &asl.Artifact{Bytes: []byte(fmt.Sprintf("params %d", i))}
			shape.ParamsSize = uint64(len(params.Bytes))
			ref, _ := asl.PutArtifact(ctx, st, asl.HashSHA256, *params)
			global = asl.StoredRope(st, ref, params.Header())
		}
		p := progtest.Random(r, shape)
		var limits pel.Limits
		if r.IntN(3) == 0 {
			limits.MaxOutputBytes = r.Uint64N(1000)
		}
		opts := pel.RunOptions{Limits: limits}

		var evA, evB, evC []pel.NodeEvent
		outA, resA, errA := pel.ExecDAGWith(mat, mustArtifact(t, renamed(p)), inputs, params, pel.ObserverFunc(func(e pel.NodeEvent) { evA = append(evA, e) }), opts)
		outB, resB, errB := pel.ExecDAGWith(nil, mustArtifact(t, p), inputs, params, pel.ObserverFunc(func(e pel.NodeEvent) { evB = append(evB, e) }), opts)
		ropeOuts, resC, errC := pel.ExecDAGRopes(nil, mustArtifact(t, p), ropes, global, pel.ObserverFunc(func(e pel.NodeEvent) {
			// Materialise the event's values as the eager path shows them.
			if e.Values != nil {
				for _, v := range e.Values {
					a, err := v.Artifact(ctx, 0)
					if err != nil {
						t.Fatal(err)
					}
					e.Outputs = append(e.Outputs, a)
				}
			}
			evC = append(evC, e)
		}), opts)
		if errA != nil || errB != nil || errC != nil {
			t.Fatalf("program %d: errors %v / %v / %v", i, errA, errB, errC)
		}
		var outC []asl.Artifact
		for _, o := range ropeOuts {
			a, err := o.Artifact(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			outC = append(outC, a)
		}
		want, wantEv := resultText(outA, resA), eventText(evA)
		for k, got := range []string{resultText(outB, resB), resultText(outC, resC)} {
			if got != want {
				t.Fatalf("program %d (%+v): evaluation %d gave\n%s\nthe materialising kernel\n%s", i, p, k+1, got, want)
			}
		}
		for k, got := range []string{eventText(evB), eventText(evC)} {
			if got != wantEv {
				t.Fatalf("program %d: evaluation %d events\n%s\nthe materialising kernel\n%s", i, k+1, got, wantEv)
			}
		}
		if resA.Status == pel.StatusOK {
			sawOK++
		} else {
			sawFail++
		}
	}
	if sawOK < n/4 || sawFail < n/20 {
		t.Fatalf("%d programs succeeded and %d failed: the generator does not cover both", sawOK, sawFail)
	}
}

// TestRopeConcatCopiesNothing: the 5,000-input concat of a 1 MiB const
// (5.2 GB of output) evaluates on ropes without allocating its output, and
// its hash streams: under a materialisation limit of 2 MiB, so that an
// operation reading the concat whole would fail, over the concat of 250
// inputs (262 MB of zeros) in the default run, of all 5,000 with
// AMDUAT_LONG=1 (internal/longtest).
func TestRopeConcatCopiesNothing(t *testing.T) {
	t.Parallel()
	opts := pel.RunOptions{MaxMaterialize: 2 << 20}
	outs, res, err := pel.ExecDAGRopes(nil, hostileConcat(t, 5000), nil, nil, nil, opts)
	if err != nil || res.Status != pel.StatusOK || len(outs) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	if got, want := outs[0].Size(), uint64(5000)<<20; got != want {
		t.Fatalf("size %d, want %d", got, want)
	}
	if outs[0].InMemory() {
		t.Fatal("a concat of 5000 inputs is one slice")
	}
	if testing.Short() {
		return
	}
	// The hash of n MiB of zeros, streamed.
	n := longtest.Logf(t, "concatenated inputs hashed", 250, 5000)
	p, err := pel.DecodeProgramArtifact(hostileConcat(t, n))
	if err != nil {
		t.Fatal(err)
	}
	p.Nodes = append(p.Nodes, hashNode(3, pel.FromNode(2, 0)))
	p.Roots = []pel.RootRef{{NodeID: 3}}
	outs, res, err = pel.ExecDAGRopes(nil, mustArtifact(t, p), nil, nil, nil, opts)
	if err != nil || res.Status != pel.StatusOK || len(outs) != 1 {
		t.Fatalf("hash of %d inputs: %v %+v", n, err, res)
	}
	if h, err := outs[0].Bytes(context.Background(), 0); err != nil || len(h) != 32 {
		t.Fatalf("hash %x, %v", h, err)
	}
}

// TestRopeMaterialiseLimit: an operation without RunRope sees its inputs
// in memory; above MaxMaterialize that is an internal failure wrapping
// ErrOutOfMemory, and no result.
func TestRopeMaterialiseLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	a := asl.Untagged(bytes.Repeat([]byte("z"), 1000))
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	in := []*asl.Rope{asl.StoredRope(st, ref, a.Header())}
	p := mustArtifact(t, renamed(pel.Program{Nodes: []pel.Node{hashNode(1, pel.External(0))}, Roots: root(1)}))
	mat := materialisingKernel(t)
	if _, res, err := pel.ExecDAGRopes(mat, p, in, nil, nil, pel.RunOptions{MaxMaterialize: 1000}); err != nil || res.Status != pel.StatusOK {
		t.Fatalf("at the limit: %v %+v", err, res)
	}
	_, res, err := pel.ExecDAGRopes(mat, p, in, nil, nil, pel.RunOptions{MaxMaterialize: 999})
	if !errors.Is(err, pel.ErrOutOfMemory) || !errors.Is(err, pel.ErrInternal) || res.PEL1Version != 0 {
		t.Fatalf("above the limit: %v %+v", err, res)
	}
	// The kernel's own hash streams: no limit applies.
	if _, res, err := pel.ExecDAGRopes(nil, mustArtifact(t, pel.Program{Nodes: []pel.Node{hashNode(1, pel.External(0))}, Roots: root(1)}), in, nil, nil, pel.RunOptions{MaxMaterialize: 1}); err != nil || res.Status != pel.StatusOK {
		t.Fatalf("kernel hash: %v %+v", err, res)
	}
}

// TestRopeDamagedInputIsAnError: a stored input damaged after the run
// started is an error from the read, never a result over wrong bytes.
func TestRopeDamagedInputIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	a := asl.Untagged(bytes.Repeat([]byte("q"), 5000))
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	st.Corrupt(ref, bytes.Repeat([]byte("r"), 5000))
	in := []*asl.Rope{asl.StoredRope(st, ref, a.Header())}
	p := mustArtifact(t, pel.Program{Nodes: []pel.Node{sliceNode(1, 0, 10, pel.External(0)), hashNode(2, pel.FromNode(1, 0))}, Roots: root(2)})
	outs, res, err := pel.ExecDAGRopes(nil, p, in, nil, nil, pel.RunOptions{})
	if !errors.Is(err, asl.ErrIntegrity) || outs != nil || res.PEL1Version != 0 {
		t.Fatalf("got %v %+v, want ErrIntegrity and no result", err, res)
	}
	if !strings.Contains(err.Error(), "node 2") {
		t.Fatalf("error does not name the node: %v", err)
	}
}
