package bench

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/bench/shapes"
	"github.com/amduat/amduat/pel"
)

// TextbookOrder is the reference the canonical ordering is compared with:
// Kahn's algorithm with a container/heap min-heap of node indices (ready
// node with the smallest id first, as seed §4.1 requires) over the same
// edges, without any validation. It assumes p is valid.
func TextbookOrder(p pel.Program) []pel.NodeID {
	n := len(p.Nodes)
	index := func(id pel.NodeID) int32 {
		i, _ := slices.BinarySearchFunc(p.Nodes, id, func(nd pel.Node, id pel.NodeID) int { return cmp.Compare(nd.ID, id) })
		return int32(i)
	}
	indeg := make([]int32, n)
	start := make([]int32, n+1)
	for i := range p.Nodes {
		for _, in := range p.Nodes[i].Inputs {
			if in.Kind == pel.InputNode {
				start[index(in.NodeID)+1]++
				indeg[i]++
			}
		}
	}
	for i := range n {
		start[i+1] += start[i]
	}
	next := slices.Clone(start[:n])
	succ := make([]int32, start[n])
	for i := range p.Nodes {
		for _, in := range p.Nodes[i].Inputs {
			if in.Kind == pel.InputNode {
				d := index(in.NodeID)
				succ[next[d]] = int32(i)
				next[d]++
			}
		}
	}
	h := &indexHeap{}
	for i := range n {
		if indeg[i] == 0 {
			heap.Push(h, int32(i))
		}
	}
	order := make([]pel.NodeID, 0, n)
	for h.Len() > 0 {
		i := heap.Pop(h).(int32)
		order = append(order, p.Nodes[i].ID)
		for _, j := range succ[start[i]:start[i+1]] {
			if indeg[j]--; indeg[j] == 0 {
				heap.Push(h, j)
			}
		}
	}
	return order
}

type indexHeap []int32

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int32)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Sample is one measured call: wall time, bytes allocated, and the peak Go
// heap above the live heap at the start and peak RSS during the call.
type Sample struct {
	D        time.Duration
	Alloc    uint64
	HeapPeak uint64
	RSS      *int64
}

// Measure runs f once in a fresh memory window (garbage collected first).
func Measure(f func() error) (Sample, error) {
	w := StartWindow()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	err := f()
	d := time.Since(start)
	runtime.ReadMemStats(&m1)
	rss, peak := w.Stop()
	s := Sample{D: d, Alloc: m1.TotalAlloc - m0.TotalAlloc, RSS: rss}
	if peak > m0.HeapAlloc {
		s.HeapPeak = peak - m0.HeapAlloc
	}
	return s, err
}

// measureIn is Measure with f run under the pprof label phase=label.
func measureIn(ctx context.Context, label string, f func() error) (Sample, error) {
	return Measure(func() error {
		var err error
		phase(ctx, label, func(context.Context) { err = f() })
		return err
	})
}

// median returns the sample with the median duration; the peak RSS and heap
// are the largest seen over all samples.
func median(ss []Sample) Sample {
	s := slices.Clone(ss)
	slices.SortFunc(s, func(a, b Sample) int { return cmp.Compare(a.D, b.D) })
	m := s[(len(s)-1)/2]
	for _, x := range ss {
		m.HeapPeak = max(m.HeapPeak, x.HeapPeak)
		if x.RSS != nil && (m.RSS == nil || *x.RSS > *m.RSS) {
			m.RSS = x.RSS
		}
	}
	return m
}

func nsPer(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }

func runExec(ctx context.Context, e *Env) ([]Row, error) {
	n, reps := e.Sizes.ExecNodes, max(e.Sizes.ExecReps, 1)
	var rows []Row
	for _, build := range []func(int) shapes.Shape{shapes.Chain, shapes.FanIn} {
		sh := build(n)
		name := "exec/" + sh.Name
		label := fmt.Sprintf("%s of %d nodes", sh.Name, n)
		e.logf("exec: %s: ordering, Prepare, direct calls and Plan.Run, %d rounds", label, reps)
		pl, err := pel.Prepare(sh.Program, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: prepare: %w", label, err)
		}
		prog, err := pel.ProgramArtifact(sh.Program)
		if err != nil {
			return nil, err
		}
		want, err := sh.Direct()
		if err != nil {
			return nil, err
		}
		var order, textbook, prepare, direct, run, execDAG []Sample
		for range reps {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var got, ref []pel.NodeID
			s, err := measureIn(ctx, "textbook", func() error { ref = TextbookOrder(sh.Program); return nil })
			textbook = append(textbook, s)
			s, err = measureIn(ctx, "order", func() error { got, err = pel.CanonicalOrder(sh.Program); return err })
			if err != nil {
				return nil, err
			}
			if !slices.Equal(got, ref) {
				return nil, fmt.Errorf("%s: CanonicalOrder and the textbook order differ", label)
			}
			order = append(order, s)
			s, err = measureIn(ctx, "prepare", func() error { _, err := pel.Prepare(sh.Program, nil); return err })
			if err != nil {
				return nil, err
			}
			prepare = append(prepare, s)
			s, err = measureIn(ctx, "direct", func() error {
				out, err := sh.Direct()
				if err == nil && !bytes.Equal(out.Bytes, want.Bytes) {
					err = fmt.Errorf("%s: direct calls gave a different output", label)
				}
				return err
			})
			if err != nil {
				return nil, err
			}
			direct = append(direct, s)
			s, err = measureIn(ctx, "planrun", func() error {
				outs, res := pl.Run(nil, nil, nil)
				return checkRun(outs, res, want)
			})
			if err != nil {
				return nil, fmt.Errorf("%s: Plan.Run: %w", label, err)
			}
			run = append(run, s)
			s, err = measureIn(ctx, "execdag", func() error {
				outs, res := pel.ExecDAG(nil, prog, nil, nil, nil)
				return checkRun(outs, res, want)
			})
			if err != nil {
				return nil, fmt.Errorf("%s: ExecDAG: %w", label, err)
			}
			execDAG = append(execDAG, s)
		}
		o, tb, pr, d, r, x := median(order), median(textbook), median(prepare), median(direct), median(run), median(execDAG)
		rows = append(rows,
			Row{
				Name:     name + "/order",
				Figure:   Quantity{nsPer(o.D, n), "ns/node"},
				Baseline: &Baseline{nsPer(tb.D, n), "ns/node", "Kahn + container/heap, no checks"},
				Target:   &Target{"<= 1000 ns/node", OnFigure, AtMost, 1000},
				PeakRSS:  o.RSS,
				Note: fmt.Sprintf("pel.CanonicalOrder (encodability and structure checks included) of the %s, median of %d; %s B/node; Prepare (order + operation lookup + params decoding) %s ns/node",
					label, reps, formatValue(float64(o.Alloc)/float64(n)), formatValue(nsPer(pr.D, n))),
			},
			Row{
				Name:     name + "/overhead",
				Figure:   Quantity{nsPer(r.D-d.D, n), "ns/node"},
				Baseline: &Baseline{nsPer(d.D, n), "ns/node", "direct op calls in Go"},
				Target:   &Target{"<= 1000 ns/node", OnFigure, AtMost, 1000},
				PeakRSS:  r.RSS,
				Note: fmt.Sprintf("(Plan.Run - direct)/N, medians of %d: Plan.Run %s ns/node, direct %s ns/node; ExecDAG from program bytes (decode, prepare, run) %s ns/node",
					reps, formatValue(nsPer(r.D, n)), formatValue(nsPer(d.D, n)), formatValue(nsPer(x.D, n))),
			},
			Row{
				Name:     name + "/alloc",
				Figure:   Quantity{float64(r.Alloc) / float64(n), "B/node"},
				Baseline: &Baseline{float64(d.Alloc) / float64(n), "B/node", "direct op calls in Go"},
				Target:   &Target{"<= 500 B/node", OnFigure, AtMost, 500},
				PeakRSS:  r.RSS,
				Note:     "runtime.MemStats TotalAlloc delta of one Plan.Run / N",
			},
			Row{
				Name:     name + "/peak-heap",
				Figure:   Quantity{float64(r.HeapPeak) / mib, "MiB"},
				Baseline: &Baseline{float64(d.HeapPeak) / mib, "MiB", "direct op calls in Go"},
				PeakRSS:  r.RSS,
				Note: fmt.Sprintf("peak Go heap during Plan.Run above the live heap before it (program and plan, sampled every 1 ms): %s B/node",
					formatValue(float64(r.HeapPeak)/float64(n))),
			},
		)
	}
	return rows, nil
}

// checkRun requires status OK and the one output want.
func checkRun(outs []asl.Artifact, res pel.ExecutionResultValue, want asl.Artifact) error {
	if res.Status != pel.StatusOK {
		return fmt.Errorf("status %s", res.Status)
	}
	if len(outs) != 1 || !bytes.Equal(outs[0].Bytes, want.Bytes) {
		return fmt.Errorf("%d outputs, not the one the direct calls give", len(outs))
	}
	return nil
}
