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

const cliSeed = 3

// cliReps is how many times each command runs, alternating, on a fresh
// store or repository each time; the best time of each is reported.
const cliReps = 2

// procRun is one timed child process.
type procRun struct {
	d      time.Duration
	maxRSS *int64 // the child's own peak RSS (runMeasured), when known
	stdout []byte
}

// timeCommand runs cmd and times it from start to exit.
func timeCommand(cmd *exec.Cmd) (procRun, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	d, rss, err := runMeasured(cmd)
	if err != nil {
		return procRun{}, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args[:min(len(cmd.Args), 3)], " "), err, strings.TrimSpace(errb.String()))
	}
	return procRun{d: d, stdout: out.Bytes(), maxRSS: rss}, nil
}

// writeFiles writes n distinct random files of size bytes into dir and
// returns their names.
func writeFiles(dir string, n, size int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names := make([]string, n)
	buf := make([]byte, size)
	for i := range names {
		names[i] = fmt.Sprintf("f%06d", i)
		FillRandom(buf, cliSeed, uint64(i))
		if err := os.WriteFile(filepath.Join(dir, names[i]), buf, 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func countLines(b []byte) int { return bytes.Count(b, []byte{'\n'}) }

func runCLI(ctx context.Context, e *Env) ([]Row, error) {
	n := e.Sizes.CLIFiles
	row := Row{
		Name:   "cli/put-files",
		Figure: Quantity{0, "files/s"},
		Target: &Target{">= 10x baseline", OnRatio, AtLeast, 10},
	}
	durable := Row{Name: "cli/put-files-vs-fsync-git", Figure: Quantity{0, "files/s"}}
	if e.AmduatBin == "" {
		row.Skipped, row.Note = true, "no amduat executable to run"
		durable.Skipped, durable.Note = true, row.Note
		return []Row{row, durable}, nil
	}
	dir, err := e.tempDir("cli")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	files := filepath.Join(dir, "files")
	e.logf("cli: writing %d files of %d B", n, e.Sizes.CLIFileSize)
	names, err := writeFiles(files, n, e.Sizes.CLIFileSize)
	if err != nil {
		return nil, err
	}
	stdinPaths := strings.Join(names, "\n") + "\n"

	amduat := func(rep int) (procRun, error) {
		store := filepath.Join(dir, fmt.Sprintf("store%d", rep))
		if _, err := timeCommand(exec.CommandContext(ctx, e.AmduatBin, "--store", store, "init")); err != nil {
			return procRun{}, err
		}
		cmd := exec.CommandContext(ctx, e.AmduatBin, append([]string{"--store", store, "put"}, names...)...)
		cmd.Dir = files
		r, err := timeCommand(cmd)
		if err == nil && countLines(r.stdout) != n {
			err = fmt.Errorf("amduat put printed %d lines for %d files", countLines(r.stdout), n)
		}
		os.RemoveAll(store)
		return r, err
	}
	gitPath, gitErr := exec.LookPath("git")
	git := func(rep int, config ...string) (procRun, error) {
		repo := filepath.Join(dir, fmt.Sprintf("repo%d", rep))
		env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+dir)
		initCmd := exec.CommandContext(ctx, gitPath, "init", "-q", repo)
		initCmd.Env = env
		if _, err := timeCommand(initCmd); err != nil {
			return procRun{}, err
		}
		cmd := exec.CommandContext(ctx, gitPath, append(config, "hash-object", "-w", "--stdin-paths")...)
		cmd.Dir = files
		cmd.Env = append(env, "GIT_DIR="+filepath.Join(repo, ".git"))
		cmd.Stdin = strings.NewReader(stdinPaths)
		r, err := timeCommand(cmd)
		if err == nil && countLines(r.stdout) != n {
			err = fmt.Errorf("git hash-object printed %d lines for %d files", countLines(r.stdout), n)
		}
		os.RemoveAll(repo)
		return r, err
	}

	var best, bestGit, bestGitSync procRun
	better := func(cur *procRun, r procRun) {
		if cur.d == 0 || r.d < cur.d {
			*cur = r
		}
	}
	reps := e.reps(cliReps)
	for rep := range reps {
		e.logf("cli: amduat put of %d files (%d/%d)", n, rep+1, reps)
		r, err := amduat(rep)
		if err != nil {
			return nil, err
		}
		better(&best, r)
		if gitErr != nil {
			continue
		}
		e.logf("cli: git hash-object -w --stdin-paths of %d files (%d/%d)", n, rep+1, reps)
		if r, err = git(rep); err != nil {
			return nil, err
		}
		better(&bestGit, r)
		e.logf("cli: git -c core.fsync=loose-object hash-object (%d/%d)", rep+1, reps)
		if r, err = git(rep, "-c", "core.fsync=loose-object"); err != nil {
			return nil, err
		}
		better(&bestGitSync, r)
	}
	row.Figure.Value = perSec(n, best.d)
	row.PeakRSS = best.maxRSS
	durable.Figure.Value = row.Figure.Value
	durable.PeakRSS = best.maxRSS
	what := fmt.Sprintf("%d files of %d B, one `amduat put` call (process start, store open, durable PutBatch every 4096 files, close): %s; best of %d, alternating with git",
		n, e.Sizes.CLIFileSize, best.d.Round(time.Millisecond), reps)
	if gitErr != nil {
		row.Skipped, durable.Skipped = true, true
		row.Note = "git is not installed: no baseline; amduat put of " + what
		durable.Note = row.Note
		return []Row{row, durable}, nil
	}
	row.Baseline = &Baseline{perSec(n, bestGit.d), "files/s", "git hash-object -w --stdin-paths"}
	row.Note = what + fmt.Sprintf("; git %s with its defaults (loose zlib objects, no fsync), in a fresh repository", bestGit.d.Round(time.Millisecond))
	durable.Baseline = &Baseline{perSec(n, bestGitSync.d), "files/s", "same, git -c core.fsync=loose-object"}
	durable.Note = fmt.Sprintf("the same amduat runs against git fsyncing every loose object (durable like amduat): %s", bestGitSync.d.Round(time.Millisecond))
	return []Row{row, durable}, nil
}
