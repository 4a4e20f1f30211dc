package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/bench/shapes"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
)

// hostileOutcome is how one `amduat pel run` child ended.
type hostileOutcome struct {
	d      time.Duration
	rss    *int64
	exit   int
	status string // the execution status and code, or what ended the process
}

// runHostileChild runs `amduat pel run` on prog with args in its own
// process (so that its peak RSS is its own) under GOMEMLIMIT=memLimit,
// which makes the default --max-memory (cmd/amduat/memory.go) that limit.
// Any exit code is an outcome, not an error: a crash is what the row
// reports.
func runHostileChild(ctx context.Context, bin, store string, memLimit int64, timeout time.Duration, prog asl.Reference, args ...string) (hostileOutcome, error) {
	// The child ends itself at --timeout; the context is a backstop.
	cctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, append([]string{"--store", store, "--json", "pel", "run", "--no-cache", "--program", prog.String(),
		"--timeout", timeout.String()}, args...)...)
	cmd.Env = append(os.Environ(), "GOMEMLIMIT="+strconv.FormatInt(memLimit, 10))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	d, rss, err := runMeasured(cmd)
	o := hostileOutcome{d: d, rss: rss}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		o.exit = ee.ExitCode()
	default:
		return o, fmt.Errorf("amduat pel run: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return o, err
	}
	stderr := strings.TrimSpace(errb.String())
	if i := strings.IndexByte(stderr, '\n'); i >= 0 {
		stderr = stderr[:i] + " ..."
	}
	switch {
	case o.exit == 0 || o.exit >= 11 && o.exit <= 14:
		var r report.Run
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			return o, fmt.Errorf("amduat pel run --json (exit %d): %w: %q", o.exit, err, out.String())
		}
		o.status = fmt.Sprintf("%s status_code %d (exit %d, result stored)", r.Status, r.StatusCode, o.exit)
		if len(r.Diagnostics) > 0 {
			o.status += ": " + r.Diagnostics[0].Message
		}
	case o.exit == 6 && strings.Contains(stderr, "--timeout"):
		o.status = fmt.Sprintf("exit 6, nothing stored: stopped by --timeout %s", timeout)
	case o.exit == 8:
		if i := strings.LastIndex(stderr, "surface run: "); i >= 0 {
			stderr = stderr[i+len("surface run: "):]
		}
		o.status = "exit 8, nothing stored: " + stderr
	default:
		o.status = fmt.Sprintf("CRASH: exit %d: %s", o.exit, stderr)
	}
	return o, nil
}

// shrinkForChild prepares this process to start a child whose peak RSS
// is wanted. os/exec starts children with vfork, and Linux carries the
// parent's peak RSS at exec into the child's ru_maxrss, so the child would
// report at least this process's peak (the programs built here). It
// returns memory to the system and resets this process's peak to its
// current RSS (/proc/self/clear_refs), so that a child's ru_maxrss is most
// often its own.
func shrinkForChild() {
	runtime.GC()
	debug.FreeOSMemory()
	resetPeak()
}

// childPeak is a child's peak RSS: its ru_maxrss when that is above
// parentHWM, this process's VmHWM read after the child's exec (then the
// ru_maxrss cannot be the peak carried from this process, which was at
// most parentHWM at the exec), else the peak sampled from
// /proc/PID/status (which can miss the last 5 ms). A kernel that ignores
// the reset of shrinkForChild leaves parentHWM high and so falls back to
// the sample rather than report this process's peak as the child's.
func childPeak(ps *os.ProcessState, parentHWM int64, sampled *int64) *int64 {
	if ru := ChildMaxRSS(ps); ru != nil && parentHWM > 0 && *ru > parentHWM {
		return ru
	}
	return sampled
}

// measuredWatch starts the watch of runMeasured's child; a test replaces
// it to learn when the watch has seen the child's peak.
var measuredWatch = watchHWM

// runMeasured runs cmd to its end and returns its wall time, its own peak
// RSS (shrinkForChild, then childPeak of a watched run; nil when unknown)
// and the error of starting or waiting for it.
func runMeasured(cmd *exec.Cmd) (time.Duration, *int64, error) {
	shrinkForChild()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	parentHWM, ok := procStatus("VmHWM")
	if !ok {
		parentHWM = -1
	}
	w := measuredWatch(cmd.Process.Pid)
	err := cmd.Wait()
	d := time.Since(start)
	return d, childPeak(cmd.ProcessState, parentHWM, w.stop(false)), err
}

// runHostile runs the hostile programs of issue 13 item 2, each without
// limits and with --max-nodes (a tenth of ExecNodes) and --max-output-bytes
// 64 MiB, each in its own `amduat pel run` process under a memory budget of
// HostileMemory (GOMEMLIMIT), and reports its peak RSS beside that of a
// one-node run, with its status and time.
func runHostile(ctx context.Context, e *Env) ([]Row, error) {
	n, budget, timeout := e.Sizes.ExecNodes, e.Sizes.HostileMemory, time.Duration(max(e.Sizes.HostileTime, 1))*time.Second
	programs := []struct{ name, what string }{
		{"concat5000", "a 1 MiB const and one concat of 5,000 inputs reading it (5.2 GB declared)"},
		{"doubling64", "a one-byte const and 63 concat(prev, prev) (2^63 bytes declared at the end)"},
		{"chain", fmt.Sprintf("a %d-node chain (16-byte const, then slices of 8 bytes)", n)},
		{"fanin", fmt.Sprintf("a %d-node fan-in (one-byte consts, one concat of all)", n)},
	}
	var rows []Row
	skip := func(note string) []Row {
		for _, p := range programs {
			for _, v := range []string{"unlimited", "limited"} {
				rows = append(rows, Row{Name: "hostile/" + p.name + "/" + v, Figure: Quantity{0, "MiB"}, Skipped: true, Note: note})
			}
		}
		for _, name := range hostileWasmNames() {
			rows = append(rows, Row{Name: "hostile/" + name, Figure: Quantity{0, "MiB"}, Skipped: true, Note: note})
		}
		for _, name := range []string{"chain-build-rss", "chain-run-rss"} {
			rows = append(rows, Row{Name: "hostile/" + name, Figure: Quantity{0, "MiB"}, Skipped: true, Note: note})
		}
		return rows
	}
	if e.AmduatBin == "" {
		return skip("no amduat executable to run"), nil
	}
	if RSSMethod() == RSSNone {
		return skip("peak RSS cannot be measured here"), nil
	}
	dir, err := e.tempDir("hostile")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	progs := []pel.Program{shapes.HostileConcat(5000), shapes.Doubling(64), shapes.Chain(n).Program, shapes.FanIn(n).Program}
	cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte("x")})
	if err != nil {
		return nil, err
	}
	trivial := pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpConst, Params: cp}}, Roots: []pel.RootRef{{NodeID: 1}}}
	// Each program has a store of its own, so that no run pays for opening
	// a store that holds the others' programs.
	stores := make([]string, len(progs)+1)
	refs := make([]asl.Reference, len(progs)+1)
	for k, p := range append(progs, trivial) {
		stores[k] = filepath.Join(dir, fmt.Sprintf("store%d", k))
		if refs[k], err = putProgram(ctx, stores[k], p); err != nil {
			return nil, err
		}
	}
	e.logf("hostile: a one-node run for the baseline")
	base, err := runHostileChild(ctx, e.AmduatBin, stores[len(progs)], budget, timeout, refs[len(progs)])
	if err != nil {
		return nil, err
	}
	if base.exit != 0 || base.rss == nil {
		return nil, fmt.Errorf("hostile: the one-node run: %s", base.status)
	}
	limits := []string{"--max-nodes", strconv.Itoa(max(n/10, 1)), "--max-output-bytes", strconv.Itoa(64 << 20)}
	for k, p := range programs {
		for _, limited := range []bool{false, true} {
			variant, args := "unlimited", []string(nil)
			if limited {
				variant, args = "limited", limits
			}
			e.logf("hostile: %s, %s", p.name, variant)
			o, err := runHostileChild(ctx, e.AmduatBin, stores[k], budget, timeout, refs[k], args...)
			if err != nil {
				return nil, fmt.Errorf("hostile: %s %s: %w", p.name, variant, err)
			}
			lim := "no --max-nodes or --max-output-bytes"
			if limited {
				lim = strings.Join(limits, " ")
			}
			row := Row{
				Name:     "hostile/" + p.name + "/" + variant,
				Figure:   Quantity{mibOf(o.rss), "MiB"},
				Baseline: &Baseline{mibOf(base.rss), "MiB", "peak RSS of a one-node pel run"},
				Target:   &Target{fmt.Sprintf("<= %s (the memory budget) + 256 MiB", sizeText(budget)), OnFigure, AtMost, float64(budget)/mib + 256},
				PeakRSS:  o.rss,
				Note: fmt.Sprintf("%s; %s; memory budget %s (GOMEMLIMIT, the default --max-memory), --timeout %s; %s: %s",
					p.what, lim, sizeText(budget), timeout, o.d.Round(time.Millisecond), o.status),
			}
			rows = append(rows, row)
		}
	}
	wasmRows, err := runHostileWasm(ctx, e, dir, base, budget, timeout)
	if err != nil {
		return nil, err
	}
	millionRows, err := runMillion(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	return append(append(rows, wasmRows...), millionRows...), nil
}

// putProgram stores prog in a new store at dir and returns its reference.
func putProgram(ctx context.Context, dir string, prog pel.Program) (asl.Reference, error) {
	a, err := pel.ProgramArtifact(prog)
	if err != nil {
		return asl.Reference{}, err
	}
	s, err := pebblestore.Create(dir, nil)
	if err != nil {
		return asl.Reference{}, err
	}
	ref, err := asl.PutArtifact(ctx, s, asl.HashSHA256, a)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return ref, err
}
