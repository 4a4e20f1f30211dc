package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// startupReps is how many times each command of the startup group runs,
// alternating with its baseline (which goes first alternates too); the
// medians are reported.
const startupReps = 21

// startupSeed fills the 1 KiB artifact of has and get.
const startupSeed = 5

// helloSource is the baseline program of startup/version: the smallest Go
// program that prints a line, built by the same toolchain in the same run.
const helloSource = `package main

import "fmt"

func main() { fmt.Println("hello, world") }
`

// startupFloor is one floor program of the startup group: a program that
// prints the hello-world's line and links only some of the amduat command's
// dependencies, built from the source tree the bench runs in (as the README
// installs the command, CGO_ENABLED=0) and timed alternating with its
// baseline: the hello-world, or `git cat-file -e` when it opens the store.
type startupFloor struct {
	row     Row
	pkg     string // import path of the program
	what    string // what it links and does, for the row's note
	opens   bool   // whether it is given the store's directory to open
	bin     string
	err     error // why it was not built
	s, base startupSeries
}

// startupFloors are the floor programs, as their rows: deps-floor links the
// two dependencies whose package inits every amduat command pays, Pebble
// and minio-go; store-floor links Pebble alone, which every command on the
// embedded store (has and get among them) needs; store-open-floor is the
// same program opening the bench's store read-only and reading its first
// key, the least `has` does.
func startupFloors() []*startupFloor {
	return []*startupFloor{
		{row: Row{Name: "startup/deps-floor", Figure: Quantity{0, "ms"}}, pkg: "github.com/amduat/amduat/bench/startupfloor",
			what: "links only Pebble and minio-go, whose package inits every amduat command pays"},
		{row: Row{Name: "startup/store-floor", Figure: Quantity{0, "ms"}}, pkg: "github.com/amduat/amduat/bench/storefloor",
			what: "links only Pebble, which every command on the embedded store opens"},
		{row: Row{Name: "startup/store-open-floor", Figure: Quantity{0, "ms"}}, pkg: "github.com/amduat/amduat/bench/storefloor", opens: true,
			what: "links only Pebble, opens the store's Pebble database read-only and reads its first key"},
	}
}

// startupSeries is the wall times and minor page faults of one command's
// runs.
type startupSeries struct {
	ms     []float64
	faults []float64
}

func (s *startupSeries) median() float64 { return Median(s.ms) }

func (s *startupSeries) text() string {
	t := fmt.Sprintf("median %.2f ms (min %.2f", Median(s.ms), slices.Min(s.ms))
	if f := Median(s.faults); f >= 0 {
		t += fmt.Sprintf(", %.0f minor faults", f)
	}
	return t + ")"
}

// timeStart runs cmd to its exit and adds its wall time (from start to
// exit) and minor page faults to s; want, when not nil, is the standard
// output it must print.
func (s *startupSeries) timeStart(cmd *exec.Cmd, want []byte) error {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args[:min(len(cmd.Args), 4)], " "), err, strings.TrimSpace(errb.String()))
	}
	if want != nil && !bytes.Equal(out.Bytes(), want) {
		return fmt.Errorf("%s printed %d bytes, want %d", strings.Join(cmd.Args[:min(len(cmd.Args), 4)], " "), out.Len(), len(want))
	}
	s.ms = append(s.ms, ms(d))
	s.faults = append(s.faults, float64(childMinorFaults(cmd.ProcessState)))
	return nil
}

// loadAverage is the 1, 5 and 15 minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// runStartup measures what a command costs before it does anything (issue
// 24): `amduat version` against a Go hello-world built in the same run, and
// `amduat has` and `get` of one 1 KiB artifact in a fresh store against
// `git cat-file -e` and `git cat-file blob` of the same bytes in a fresh
// repository. Each pair alternates startupReps times; medians are
// compared. The floor rows (startupFloors) time programs that link only
// Pebble and minio-go, and only Pebble, against the same hello-world: the
// part of the commands' start that is those dependencies' package
// initialisation and that no change to this module can remove.
func runStartup(ctx context.Context, e *Env) ([]Row, error) {
	version := Row{Name: "startup/version", Figure: Quantity{0, "ms"}, Target: &Target{"<= 1.5x baseline", OnRatio, AtMost, 1.5}}
	has := Row{Name: "startup/has-1k", Figure: Quantity{0, "ms"}, Target: &Target{"<= 2x baseline", OnRatio, AtMost, 2}}
	get := Row{Name: "startup/get-1k", Figure: Quantity{0, "ms"}, Target: &Target{"<= 2x baseline", OnRatio, AtMost, 2}}
	floors := startupFloors()
	rows := []*Row{&version, &has, &get}
	for _, f := range floors {
		rows = append(rows, &f.row)
	}
	result := func() []Row {
		out := make([]Row, len(rows))
		for i, r := range rows {
			out[i] = *r
		}
		return out
	}
	if e.AmduatBin == "" {
		for _, r := range rows {
			r.Skipped, r.Note = true, "no amduat executable to run"
		}
		return result(), nil
	}
	dir, err := e.tempDir("startup")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	loadBefore := loadAverage()

	// The baselines: a hello-world built now, and git.
	var hello string
	goPath, goErr := exec.LookPath("go")
	if goErr == nil {
		src := filepath.Join(dir, "hello")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(helloSource), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644); err != nil {
			return nil, err
		}
		hello = filepath.Join(dir, "hello-world")
		e.logf("startup: building a Go hello-world")
		b := exec.CommandContext(ctx, goPath, "build", "-o", hello, ".")
		b.Dir = src
		b.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
		if out, err := b.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the hello-world baseline: %w: %s", err, out)
		}
	}
	gitPath, gitErr := exec.LookPath("git")
	// The floors, each program built once from the source tree of the
	// working directory; outside one, or without their baseline, their
	// rows are skipped.
	type build struct {
		bin string
		err error
	}
	built := map[string]build{}
	for _, f := range floors {
		if goErr != nil {
			f.err = goErr
			continue
		}
		if f.opens && gitErr != nil {
			f.err = fmt.Errorf("no baseline: %w", gitErr)
			continue
		}
		b, ok := built[f.pkg]
		if !ok {
			b.bin = filepath.Join(dir, path.Base(f.pkg))
			e.logf("startup: building %s", f.pkg)
			c := exec.CommandContext(ctx, goPath, "build", "-o", b.bin, f.pkg)
			c.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := c.CombinedOutput(); err != nil {
				b.err = fmt.Errorf("go build %s (run the bench from the amduat source tree): %w: %s", f.pkg, err, bytes.TrimSpace(out))
			}
			built[f.pkg] = b
		}
		f.bin, f.err = b.bin, b.err
	}

	// The 1 KiB artifact, in a fresh store and a fresh repository.
	content := make([]byte, 1<<10)
	FillRandom(content, startupSeed, 0)
	file := filepath.Join(dir, "artifact")
	if err := os.WriteFile(file, content, 0o644); err != nil {
		return nil, err
	}
	store := filepath.Join(dir, "store")
	if _, err := timeCommand(exec.CommandContext(ctx, e.AmduatBin, "--store", store, "init")); err != nil {
		return nil, err
	}
	put, err := timeCommand(exec.CommandContext(ctx, e.AmduatBin, "--store", store, "put", file))
	if err != nil {
		return nil, err
	}
	ref := strings.TrimSpace(string(put.stdout))
	var oid string
	gitEnv := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+dir, "GIT_DIR="+filepath.Join(dir, "repo", ".git"))
	if gitErr == nil {
		initCmd := exec.CommandContext(ctx, gitPath, "init", "-q", filepath.Join(dir, "repo"))
		initCmd.Env = gitEnv
		if _, err := timeCommand(initCmd); err != nil {
			return nil, err
		}
		hashCmd := exec.CommandContext(ctx, gitPath, "hash-object", "-w", file)
		hashCmd.Env = gitEnv
		r, err := timeCommand(hashCmd)
		if err != nil {
			return nil, err
		}
		oid = strings.TrimSpace(string(r.stdout))
	}

	var sVersion, sHello, sHas, sGitHas, sGet, sGitGet startupSeries
	amduat := func(args ...string) *exec.Cmd { return exec.CommandContext(ctx, e.AmduatBin, args...) }
	git := func(args ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, gitPath, args...)
		c.Env = gitEnv
		return c
	}
	type step struct {
		s    *startupSeries
		cmd  func() *exec.Cmd
		want []byte
	}
	pairs := [][2]*step{
		{{&sVersion, func() *exec.Cmd { return amduat("version") }, nil}, {&sHello, func() *exec.Cmd { return exec.CommandContext(ctx, hello) }, []byte("hello, world\n")}},
		{{&sHas, func() *exec.Cmd { return amduat("--store", store, "has", ref) }, []byte(ref + " present\n")}, {&sGitHas, func() *exec.Cmd { return git("cat-file", "-e", oid) }, []byte{}}},
		{{&sGet, func() *exec.Cmd { return amduat("--store", store, "get", ref) }, content}, {&sGitGet, func() *exec.Cmd { return git("cat-file", "blob", oid) }, content}},
	}
	haveBaseline := []bool{goErr == nil, gitErr == nil, gitErr == nil}
	for _, f := range floors {
		if f.err != nil {
			continue
		}
		run := step{&f.s, func() *exec.Cmd { return exec.CommandContext(ctx, f.bin) }, []byte("hello, world\n")}
		base := step{&f.base, func() *exec.Cmd { return exec.CommandContext(ctx, hello) }, []byte("hello, world\n")}
		if f.opens {
			run.cmd = func() *exec.Cmd { return exec.CommandContext(ctx, f.bin, store) }
			base = step{&f.base, func() *exec.Cmd { return git("cat-file", "-e", oid) }, []byte{}}
		}
		pairs = append(pairs, [2]*step{&run, &base})
		haveBaseline = append(haveBaseline, true)
	}
	reps := e.reps(startupReps)
	e.logf("startup: %d alternating runs each of amduat version, has and get against their baselines", reps)
	for i := range reps {
		for k, p := range pairs {
			order := []*step{p[0], p[1]}
			if i%2 == 1 {
				order = []*step{p[1], p[0]}
			}
			for _, st := range order {
				if !haveBaseline[k] && st == p[1] {
					continue
				}
				if err := st.s.timeStart(st.cmd(), st.want); err != nil {
					return nil, err
				}
			}
		}
	}
	load := fmt.Sprintf("load average %s before, %s after", loadBefore, loadAverage())

	version.Figure.Value = sVersion.median()
	version.Note = fmt.Sprintf("`amduat version`, process start to exit, %d runs: %s", reps, sVersion.text())
	if goErr != nil {
		version.Skipped = true
		version.Note = "go is not installed: no hello-world baseline; " + version.Note + "; " + load
	} else {
		version.Baseline = &Baseline{sHello.median(), "ms", "a Go hello-world (fmt.Println) built by the same toolchain in this run"}
		version.Note += fmt.Sprintf("; hello-world %s, alternating; %s", sHello.text(), load)
	}
	for _, c := range []struct {
		r          *Row
		s, g       *startupSeries
		what, base string
	}{
		{&has, &sHas, &sGitHas, "`amduat --store DIR has REF`", "git cat-file -e OID"},
		{&get, &sGet, &sGitGet, "`amduat --store DIR get REF` (1 KiB to stdout)", "git cat-file blob OID"},
	} {
		c.r.Figure.Value = c.s.median()
		c.r.Note = fmt.Sprintf("%s of one 1 KiB artifact in a fresh store, %d runs: %s", c.what, reps, c.s.text())
		if gitErr != nil {
			c.r.Skipped = true
			c.r.Note = "git is not installed: no baseline; " + c.r.Note + "; " + load
			continue
		}
		c.r.Baseline = &Baseline{c.g.median(), "ms", c.base + " of the same bytes in a fresh repository"}
		c.r.Note += fmt.Sprintf("; %s %s, alternating; %s", c.base, c.g.text(), load)
	}
	for _, f := range floors {
		r := &f.row
		if f.err != nil {
			r.Skipped = true
			r.Note = fmt.Sprintf("no floor program: %v", f.err)
			continue
		}
		r.Figure.Value = f.s.median()
		name := strings.TrimPrefix(f.pkg, "github.com/amduat/amduat/")
		if f.opens {
			r.Baseline = &Baseline{f.base.median(), "ms", "git cat-file -e OID of the same bytes in a fresh repository"}
			r.Note = fmt.Sprintf("%s DIR: %s, %d runs: %s; git cat-file -e %s, alternating; amduat has is %.2fx this floor",
				name, f.what, reps, f.s.text(), f.base.text(), sHas.median()/f.s.median())
		} else {
			r.Baseline = &Baseline{f.base.median(), "ms", "a Go hello-world (fmt.Println) built by the same toolchain in this run"}
			r.Note = fmt.Sprintf("%s: prints a line and %s, %d runs: %s; hello-world %s, alternating; amduat version is %.2fx this floor",
				name, f.what, reps, f.s.text(), f.base.text(), sVersion.median()/f.s.median())
		}
		r.Note += "; " + load
	}
	return result(), nil
}
