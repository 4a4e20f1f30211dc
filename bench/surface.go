package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

const (
	surfaceSeed      = 4
	surfaceInputSize = 1 << 10
)

// SurfaceProgram is a 100-node program over two 1 KiB inputs: 33 rounds of
// concat (the previous 1 KiB slice, or input 0, with input r mod 2: 2 KiB),
// slice (1 KiB of it, at an offset that moves each round) and hash
// (SHA-256 of the slice), then one concat of the 33 digests (the root,
// 1056 bytes).
func SurfaceProgram() pel.Program {
	const rounds = 33
	var nodes []pel.Node
	var digests []pel.DagInput
	id := func() pel.NodeID { return pel.NodeID(len(nodes) + 1) }
	prev := pel.External(0)
	for r := range rounds {
		c := id()
		nodes = append(nodes, pel.Node{ID: c, Op: opreg.OpConcat, Inputs: []pel.DagInput{prev, pel.External(uint32((r + 1) % 2))}, Params: []byte{}})
		s := id()
		off := uint64(r*31) % surfaceInputSize
		nodes = append(nodes, pel.Node{ID: s, Op: opreg.OpSlice, Inputs: []pel.DagInput{pel.FromNode(c, 0)},
			Params: opreg.EncodeSliceParams(opreg.SliceParams{Offset: off, Length: surfaceInputSize})})
		h := id()
		nodes = append(nodes, pel.Node{ID: h, Op: opreg.OpHash, Inputs: []pel.DagInput{pel.FromNode(s, 0)}, Params: []byte{}})
		prev = pel.FromNode(s, 0)
		digests = append(digests, pel.FromNode(h, 0))
	}
	root := id()
	nodes = append(nodes, pel.Node{ID: root, Op: opreg.OpConcat, Inputs: digests, Params: []byte{}})
	return pel.Program{Nodes: nodes, Roots: []pel.RootRef{{NodeID: root}}}
}

// surfaceInputs returns the two inputs of run i: fresh content per run.
func surfaceInputs(i int) []asl.Artifact {
	ins := make([]asl.Artifact, 2)
	for k := range ins {
		b := make([]byte, surfaceInputSize)
		FillRandom(b, surfaceSeed, uint64(2*i+k))
		ins[k] = asl.Untagged(b)
	}
	return ins
}

func runSurface(ctx context.Context, e *Env) ([]Row, error) {
	runs := e.Sizes.SurfaceRuns
	dir, err := e.tempDir("surface")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s, err := pebblestore.Create(filepath.Join(dir, "store"), nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	prog, err := pel.ProgramArtifact(SurfaceProgram())
	if err != nil {
		return nil, err
	}
	progRef, err := asl.PutArtifact(ctx, s, asl.HashSHA256, prog)
	if err != nil {
		return nil, err
	}
	fresh := surf.New(s, surf.Options{NoCache: true})
	cached := surf.New(s, surf.Options{})

	putInputs := func(i int) ([]asl.Artifact, surf.Request, error) {
		ins := surfaceInputs(i)
		refs, err := s.PutBatch(ctx, asl.HashSHA256, ins)
		return ins, surf.Request{ProgramRef: progRef, InputRefs: refs}, err
	}
	timeRun := func(sf *surf.Surface, req surf.Request, wantHit bool) (time.Duration, *surf.Run, error) {
		label := "run"
		if sf == cached {
			label = map[bool]string{false: "cache-miss", true: "cache-hit"}[wantHit]
		}
		var run *surf.Run
		var err error
		start := time.Now()
		phase(ctx, label, func(ctx context.Context) { run, err = sf.Run(ctx, req) })
		d := time.Since(start)
		if err != nil {
			return 0, nil, err
		}
		if run.Result.Value.Status != pel.StatusOK || run.CacheHit != wantHit {
			return 0, nil, fmt.Errorf("surface run: status %s, cache hit %v (want %v)", run.Result.Value.Status, run.CacheHit, wantHit)
		}
		return d, run, nil
	}

	e.logf("surface: %d fresh runs (NoCache) of a %d-node program, interleaved with synced 1-artifact commits", runs, len(SurfaceProgram().Nodes))
	var runD, commitD, execD, missD, hitD []time.Duration
	w := StartWindow()
	for i := range runs {
		ins, req, err := putInputs(i)
		if err != nil {
			return nil, err
		}
		probe := make([]byte, surfaceInputSize)
		FillRandom(probe, surfaceSeed+1, uint64(i))
		commit := func() error {
			var err error
			t := time.Now()
			phase(ctx, "commit", func(ctx context.Context) {
				_, err = s.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged(probe)})
			})
			commitD = append(commitD, time.Since(t))
			return err
		}
		// Alternate which goes first, so neither always follows the other's
		// sync.
		if i%2 == 0 {
			if err := commit(); err != nil {
				return nil, err
			}
		}
		d, _, err := timeRun(fresh, req, false)
		if err != nil {
			return nil, err
		}
		runD = append(runD, d)
		if i%2 == 1 {
			if err := commit(); err != nil {
				return nil, err
			}
		}
		t := time.Now()
		if _, res := pel.ExecDAG(nil, prog, ins, nil, nil); res.Status != pel.StatusOK {
			return nil, fmt.Errorf("ExecDAG: status %s", res.Status)
		}
		execD = append(execD, time.Since(t))
	}
	rssFresh, _ := w.Stop()

	e.logf("surface: %d requests run twice with the action cache on (execute, then hit)", runs)
	w = StartWindow()
	for i := range runs {
		_, req, err := putInputs(runs + i)
		if err != nil {
			return nil, err
		}
		d1, r1, err := timeRun(cached, req, false)
		if err != nil {
			return nil, err
		}
		d2, r2, err := timeRun(cached, req, true)
		if err != nil {
			return nil, err
		}
		if r1.ResultRef != r2.ResultRef {
			return nil, fmt.Errorf("cache hit returned result %s, the run stored %s", r2.ResultRef, r1.ResultRef)
		}
		missD, hitD = append(missD, d1), append(hitD, d2)
	}
	rssCache, _ := w.Stop()

	return []Row{
		{
			Name:     "surface/run-p50",
			Figure:   Quantity{percentileMS(runD, 50), "ms"},
			Baseline: &Baseline{percentileMS(commitD, 50), "ms", "synced 1-artifact PutBatch, p50"},
			Target:   &Target{"<= 5 ms", OnFigure, AtMost, 5},
			PeakRSS:  rssFresh,
			Note: fmt.Sprintf("%d surface runs (NoCache): resolve program + 2 inputs of 1 KiB (fresh content each run), Exec_DAG of %d nodes, store output + result + trace + provenance edge with index entries in one synced batch; Exec_DAG alone p50 %s ms",
				runs, len(SurfaceProgram().Nodes), formatValue(percentileMS(execD, 50))),
		},
		{
			Name:     "surface/run-p99",
			Figure:   Quantity{percentileMS(runD, 99), "ms"},
			Baseline: &Baseline{percentileMS(commitD, 99), "ms", "synced 1-artifact PutBatch, p99"},
			PeakRSS:  rssFresh,
			Note:     fmt.Sprintf("same runs; max %s ms", formatValue(percentileMS(runD, 100))),
		},
		{
			Name:     "surface/cache-hit-p50",
			Figure:   Quantity{percentileMS(hitD, 50), "ms"},
			Baseline: &Baseline{percentileMS(missD, 50), "ms", "fresh run p50, cache on"},
			PeakRSS:  rssCache,
			Note: fmt.Sprintf("%d requests run twice on a Surface with the action cache: the second answers from the cache (salt + lookup + verified result fetch), p99 %s ms; the first executes and records, p99 %s ms",
				runs, formatValue(percentileMS(hitD, 99)), formatValue(percentileMS(missD, 99))),
		},
	}, nil
}
