package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/amduat/amduat/bench/shapes"
	"github.com/amduat/amduat/pel"
)

// millionTarget is the peak RSS a 1,000,000-node chain may take to build
// and to run (issue 22 item 4, SPECS.md §14.11).
const millionTarget = 256

// runMillion builds the ExecNodes-node chain from its JSON program text
// with `amduat pel build`, then runs it with `amduat pel run --no-cache`,
// each in its own process, and reports each one's peak RSS against the
// size of the program's own bytes (the artifact) and, at 1,000,000 nodes
// or more, against the target of 256 MiB. No GOMEMLIMIT is set: the
// figure is what the commands take by default.
func runMillion(ctx context.Context, e *Env, dir string) ([]Row, error) {
	n := e.Sizes.ExecNodes
	names := []string{"hostile/chain-build-rss", "hostile/chain-run-rss"}
	prog := shapes.Chain(n).Program
	art, err := pel.ProgramArtifact(prog)
	if err != nil {
		return nil, err
	}
	j, err := pel.ProgramToJSON(prog, nil)
	if err != nil {
		return nil, err
	}
	prog = pel.Program{}
	size := float64(len(art.Bytes)) / mib
	art.Bytes = nil
	src := filepath.Join(dir, "chain.json")
	if err := os.WriteFile(src, j, 0o644); err != nil {
		return nil, err
	}
	jsonSize := len(j)
	j = nil
	store := filepath.Join(dir, "million-store")
	if out, err := exec.CommandContext(ctx, e.AmduatBin, "--store", store, "init").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("million: amduat init: %w: %s", err, out)
	}
	row := func(name, what string, d time.Duration, rss *int64) Row {
		r := Row{Name: name, Figure: Quantity{mibOf(rss), "MiB"},
			Baseline: &Baseline{size, "MiB", "the program's ProgramBytes"}, PeakRSS: rss,
			Note: fmt.Sprintf("%s of a %d-node chain (16-byte const, then slices of 8 bytes; JSON text %s, ProgramBytes %s) in its own process; %s",
				what, n, sizeText(int64(jsonSize)), sizeText(int64(size*mib)), d.Round(time.Millisecond))}
		if n >= 1_000_000 {
			r.Target = &Target{fmt.Sprintf("<= %d MiB at %d nodes", millionTarget, n), OnFigure, AtMost, millionTarget}
		}
		return r
	}
	e.logf("hostile: amduat pel build of a %d-node chain", n)
	var out strings.Builder
	cmd := exec.CommandContext(ctx, e.AmduatBin, "--store", store, "pel", "build", src)
	cmd.Stdout = &out
	d, rss, err := runMeasured(cmd)
	if err != nil {
		return nil, fmt.Errorf("million: amduat pel build: %w", err)
	}
	rows := []Row{row(names[0], "amduat pel build", d, rss)}
	ref := strings.TrimSpace(out.String())
	e.logf("hostile: amduat pel run of a %d-node chain", n)
	cmd = exec.CommandContext(ctx, e.AmduatBin, "--store", store, "pel", "run", "--no-cache", "--quiet", "--program", ref)
	d, rss, err = runMeasured(cmd)
	if err != nil {
		return nil, fmt.Errorf("million: amduat pel run: %w", err)
	}
	return append(rows, row(names[1], "amduat pel run --no-cache", d, rss)), nil
}
