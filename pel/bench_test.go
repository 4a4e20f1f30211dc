package pel_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/amduat/amduat/bench/shapes"
	"github.com/amduat/amduat/pel"
)

// perNode runs f in a b.Loop and reports ns/node and B/node.
func perNode(b *testing.B, nodes int, f func()) {
	b.Helper()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		f()
	}
	runtime.ReadMemStats(&after)
	total := float64(b.N) * float64(nodes)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/node")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/total, "B/node")
}

// BenchmarkValidate measures validation and canonical ordering of
// million-node programs: a chain (each node reads the previous one) and a
// wide fan-in (one node reads all others).
func BenchmarkValidate(b *testing.B) {
	const n = 1_000_000
	for _, shape := range []struct {
		name string
		p    pel.Program
	}{{"chain-1M", chain(b, n)}, {"fanin-1M", fanIn(b, n)}} {
		bytes, err := pel.EncodeProgram(shape.p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(shape.name+"/CanonicalOrder", func(b *testing.B) {
			perNode(b, n, func() {
				if _, err := pel.CanonicalOrder(shape.p); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(shape.name+"/Prepare", func(b *testing.B) {
			perNode(b, n, func() {
				if _, err := pel.Prepare(shape.p, nil); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(shape.name+"/Decode", func(b *testing.B) {
			b.SetBytes(int64(len(bytes)))
			perNode(b, n, func() {
				if _, err := pel.DecodeProgram(bytes); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkExecOverhead compares Exec_DAG on shapes.Chain (a chain of n
// slice nodes, each taking bytes [0, 8) of the previous output, so the
// operation itself is trivial) with the shape's direct calls of the same
// operation functions from Go. The difference is the engine's per-node cost.
func BenchmarkExecOverhead(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		shape := shapes.Chain(n)
		a := mustArtifact(b, shape.Program)
		pl, err := pel.Prepare(shape.Program, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("direct-%d", n), func(b *testing.B) {
			perNode(b, n, func() {
				if out, err := shape.Direct(); err != nil || len(out.Bytes) != 8 {
					b.Fatal("wrong output", err)
				}
			})
		})
		b.Run(fmt.Sprintf("PlanRun-%d", n), func(b *testing.B) {
			perNode(b, n, func() {
				if _, res := pl.Run(nil, nil, nil); res.Status != pel.StatusOK {
					b.Fatal(res.Status)
				}
			})
		})
		b.Run(fmt.Sprintf("ExecDAG-%d", n), func(b *testing.B) {
			perNode(b, n, func() {
				if _, res := pel.ExecDAG(nil, a, nil, nil, nil); res.Status != pel.StatusOK {
					b.Fatal(res.Status)
				}
			})
		})
	}
}
