package bench

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/bench/shapes"
	"github.com/amduat/amduat/pel"
)

const parallelSeed = 6

// wideInputs returns n distinct random inputs of size bytes.
func wideInputs(n, size int) []asl.Artifact {
	ins := make([]asl.Artifact, n)
	for i := range ins {
		b := make([]byte, size)
		FillRandom(b, parallelSeed, uint64(i))
		ins[i] = asl.Untagged(b)
	}
	return ins
}

// runParallel measures the speculative parallel evaluation (SPECS.md
// §12.10) against the sequential one, alternating, in the same process on
// the same program and inputs: a wide program of CPU-heavy nodes (hash of
// ParallelSize bytes each), and the same program over 4 KiB inputs, which
// the evaluator leaves sequential because the hand-off would cost more.
func runParallel(ctx context.Context, e *Env) ([]Row, error) {
	n, reps, workers := e.Sizes.ParallelNodes, max(e.Sizes.ExecReps, 1)*2, runtime.GOMAXPROCS(0)
	cases := []struct {
		name, what string
		size       int
		target     *Target
	}{
		{"wide-hash", "CPU-heavy nodes", e.Sizes.ParallelSize, &Target{">= 1.5x baseline", OnRatio, AtLeast, 1.5}},
		{"narrow-hash", "cheap nodes, left sequential by the policy", 4 << 10, &Target{">= 0.9x baseline", OnRatio, AtLeast, 0.9}},
	}
	var rows []Row
	for _, sh := range cases {
		pl, err := pel.Prepare(shapes.WideHash(n), nil)
		if err != nil {
			return nil, err
		}
		inputs := wideInputs(n, sh.size)
		want, res, err := pl.RunWith(inputs, nil, nil, pel.RunOptions{})
		if err != nil || res.Status != pel.StatusOK {
			return nil, fmt.Errorf("parallel: %s: sequential run: %v %s", sh.name, err, res.Status)
		}
		e.logf("parallel: %s: %d hash nodes over %s inputs, sequential and %d workers alternating, %d rounds", sh.name, n, sizeText(int64(sh.size)), workers, reps)
		var seq, par []Sample
		var cpu [2]time.Duration // CPU time of the sequential and the parallel runs
		for range reps {
			for _, w := range []int{1, workers} {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				s, err := measureIn(ctx, fmt.Sprintf("workers-%d", w), func() error {
					c0 := processCPU()
					defer func() { cpu[min(w-1, 1)] += processCPU() - c0 }()
					got, res, err := pl.RunWith(inputs, nil, nil, pel.RunOptions{Workers: w})
					if err == nil && (res.Status != pel.StatusOK || !reflect.DeepEqual(got, want)) {
						err = fmt.Errorf("%d workers: status %s, outputs differ from the sequential run", w, res.Status)
					}
					return err
				})
				if err != nil {
					return nil, fmt.Errorf("parallel: %s: %w", sh.name, err)
				}
				if w == 1 {
					seq = append(seq, s)
				} else {
					par = append(par, s)
				}
			}
		}
		total := int64(n) * int64(sh.size)
		sm, pm := median(seq), median(par)
		var wall [2]time.Duration
		for k := range seq {
			wall[0] += seq[k].D
			wall[1] += par[k].D
		}
		rows = append(rows, Row{
			Name:     "parallel/" + sh.name,
			Figure:   Quantity{mibPerSec(total, pm.D), "MiB/s"},
			Baseline: &Baseline{mibPerSec(total, sm.D), "MiB/s", "sequential evaluation (Workers 1), same run"},
			Target:   sh.target,
			PeakRSS:  pm.RSS,
			Note: fmt.Sprintf("%s: %d pel.bytes.hash.asl1 nodes over distinct %s inputs + concat of the digests, Plan.RunWith with Workers %d (GOMAXPROCS) against Workers 1, medians of %d alternating: %s against %s; CPUs busy (process CPU time / wall time) %.2f against %.2f",
				sh.what, n, sizeText(int64(sh.size)), workers, reps, pm.D.Round(time.Microsecond), sm.D.Round(time.Microsecond),
				cpu[1].Seconds()/wall[1].Seconds(), cpu[0].Seconds()/wall[0].Seconds()),
		})
	}
	if workers < 2 {
		for i := range rows {
			rows[i].Note = "GOMAXPROCS is 1: no parallelism to measure; " + rows[i].Note
			rows[i].Target = nil
		}
	}
	return slices.Clip(rows), nil
}
