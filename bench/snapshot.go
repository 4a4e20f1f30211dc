package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// snapshotDirs is how many directories the snapshot group spreads its
// files over (one tree each, plus the top one).
const snapshotDirs = 100

// snapshotReps is how many times each of the group's commands runs,
// alternating; the best run counts. More than the cli group's cliReps:
// each run writes 20 MB of small files, whose writeback and cache
// eviction fall on whichever command runs next.
const snapshotReps = 5

// runSnapshot measures directories as snapshots (SPECS.md §19.10): `amduat
// put -r` of a directory of many small files against `amduat put
// --stdin-paths` of the same files (the put without the trees), and `amduat
// get -r` of the tree against `cp -r` of the directory.
func runSnapshot(ctx context.Context, e *Env) ([]Row, error) {
	n := e.Sizes.CLIFiles
	putRow := Row{
		Name:   "snapshot/put-r",
		Figure: Quantity{0, "files/s"},
		Target: &Target{">= 1/1.1 of put without trees", OnRatio, AtLeast, 1 / 1.1},
	}
	restoreRow := Row{
		Name:   "snapshot/restore",
		Figure: Quantity{0, "files/s"},
		Target: &Target{">= 0.5x cp -r", OnRatio, AtLeast, 0.5},
	}
	if e.AmduatBin == "" {
		putRow.Skipped, putRow.Note = true, "no amduat executable to run"
		restoreRow.Skipped, restoreRow.Note = true, putRow.Note
		return []Row{putRow, restoreRow}, nil
	}
	dir, err := e.tempDir("snapshot")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "src")
	e.logf("snapshot: writing %d files of %d B in %d directories", n, e.Sizes.CLIFileSize, snapshotDirs)
	var paths []string
	buf := make([]byte, e.Sizes.CLIFileSize)
	for i := range n {
		rel := filepath.Join(fmt.Sprintf("d%03d", i%snapshotDirs), fmt.Sprintf("f%06d", i))
		p := filepath.Join(src, rel)
		if i < snapshotDirs {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
		}
		FillRandom(buf, cliSeed+1, uint64(i))
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, rel)
	}
	stdinPaths := strings.Join(paths, "\n") + "\n"

	var bestTree, bestFlat, bestRestore, bestCp procRun
	better := func(cur *procRun, r procRun) {
		if cur.d == 0 || r.d < cur.d {
			*cur = r
		}
	}
	reps := e.reps(snapshotReps)
	for rep := range reps {
		e.logf("snapshot: put --stdin-paths of %d files (%d/%d)", n, rep+1, reps)
		flat := filepath.Join(dir, fmt.Sprintf("store%d", 2*rep))
		if _, err := timeCommand(exec.CommandContext(ctx, e.AmduatBin, "--store", flat, "init")); err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, e.AmduatBin, "--store", flat, "put", "--stdin-paths")
		cmd.Dir, cmd.Stdin = src, strings.NewReader(stdinPaths)
		r, err := timeCommand(cmd)
		os.RemoveAll(flat)
		if err != nil {
			return nil, err
		}
		if got := countLines(r.stdout); got != n {
			return nil, fmt.Errorf("amduat put --stdin-paths printed %d lines, want %d", got, n)
		}
		better(&bestFlat, r)

		e.logf("snapshot: put -r of %d files, get -r, cp -r (%d/%d)", n, rep+1, reps)
		store := filepath.Join(dir, fmt.Sprintf("store%d", 2*rep+1))
		if _, err := timeCommand(exec.CommandContext(ctx, e.AmduatBin, "--store", store, "init")); err != nil {
			return nil, err
		}
		cmd = exec.CommandContext(ctx, e.AmduatBin, "--store", store, "put", "-r", ".")
		cmd.Dir = src
		r, err = timeCommand(cmd)
		if err != nil {
			os.RemoveAll(store)
			return nil, err
		}
		if got := countLines(r.stdout); got != n+1 {
			os.RemoveAll(store)
			return nil, fmt.Errorf("amduat put -r printed %d lines, want %d", got, n+1)
		}
		better(&bestTree, r)
		fields := bytes.Fields(r.stdout)
		treeRef := string(fields[len(fields)-1])
		out := filepath.Join(dir, fmt.Sprintf("restored%d", rep))
		r, err = timeCommand(exec.CommandContext(ctx, e.AmduatBin, "--store", store, "get", "-r", treeRef, "-o", out))
		os.RemoveAll(out)
		os.RemoveAll(store)
		if err != nil {
			return nil, err
		}
		better(&bestRestore, r)
		cpOut := filepath.Join(dir, fmt.Sprintf("copied%d", rep))
		r, err = timeCommand(exec.CommandContext(ctx, "cp", "-r", src, cpOut))
		os.RemoveAll(cpOut)
		if err != nil {
			return nil, err
		}
		better(&bestCp, r)
	}
	putRow.Figure.Value = perSec(n, bestTree.d)
	putRow.PeakRSS = bestTree.maxRSS
	putRow.Baseline = &Baseline{perSec(n, bestFlat.d), "files/s", "amduat put --stdin-paths of the same files (no trees)"}
	putRow.Note = fmt.Sprintf("%d files of %d B in %d directories: put -r %s (files, %d trees), put --stdin-paths %s; best of %d, alternating",
		n, e.Sizes.CLIFileSize, snapshotDirs, bestTree.d.Round(time.Millisecond), snapshotDirs+1, bestFlat.d.Round(time.Millisecond), reps)
	restoreRow.Figure.Value = perSec(n, bestRestore.d)
	restoreRow.PeakRSS = bestRestore.maxRSS
	restoreRow.Baseline = &Baseline{perSec(n, bestCp.d), "files/s", "cp -r of the directory"}
	restoreRow.Note = fmt.Sprintf("get -r of the tree (every file verified, created exclusively through os.Root) %s, cp -r %s; best of %d, alternating",
		bestRestore.d.Round(time.Millisecond), bestCp.d.Round(time.Millisecond), reps)
	return []Row{putRow, restoreRow}, nil
}
