package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/surf"
)

func init() { addPELCommand(newPELRunCmd) }

// inputFileMark prefixes the --input-file entries of pel run's input list,
// which holds --input and --input-file values in command-line order.
const inputFileMark = "\x00file:"

// inputValue appends its flag's values, marked, to the shared input list.
type inputValue struct {
	list *[]string
	mark string
}

func (v inputValue) Set(s string) error { *v.list = append(*v.list, v.mark+s); return nil }
func (v inputValue) String() string     { return "" }
func (v inputValue) Type() string {
	if v.mark != "" {
		return "FILE"
	}
	return "REF"
}

// resolveInputs turns pel run's input list into references: a REF is
// parsed (abbreviations resolved in s), a FILE is stored under id (as put
// would) and its reference used.
func (a *app) resolveInputs(ctx context.Context, s backend, id asl.HashID, list []string) ([]asl.Reference, error) {
	refs := make([]asl.Reference, 0, len(list))
	for _, in := range list {
		path, isFile := strings.CutPrefix(in, inputFileMark)
		if !isFile {
			ref, err := a.parseRefIn(s, in)
			if err != nil {
				return nil, err
			}
			refs = append(refs, ref)
			continue
		}
		var got asl.Reference
		p := &putter{store: s, hash: id, stdin: a.stdin, emit: func(it putItem) error { got = it.Ref; return nil }}
		if err := p.add(ctx, path); err != nil {
			return nil, err
		}
		if err := p.flush(ctx); err != nil {
			return nil, err
		}
		refs = append(refs, got)
	}
	return refs, nil
}

// writeRunText writes the default output of `pel run`: result_ref,
// trace_ref, output_ref[N], the status line, then diagnostics and the store
// failure, if any.
func writeRunText(w io.Writer, r *surf.Run) {
	v := r.Result.Value
	fmt.Fprintf(w, "result_ref %s\ntrace_ref %s\n", r.ResultRef, r.TraceRef)
	writeRefLines(w, "", "output_ref", r.OutputRefs)
	fmt.Fprintf(w, "status %s status_code 0x%08x\n", v.Status, v.Summary.StatusCode)
	writeDiagLines(w, "", v.Diagnostics)
	if r.Result.HasStoreFailure {
		fmt.Fprintln(w, storeFailureLine(r.Result.StoreFailure))
	}
}

// runFailureLine is the stderr line of a run whose status is not OK.
func runFailureLine(r *surf.Run) string {
	v := r.Result.Value
	msg := fmt.Sprintf("program status %s status_code 0x%08x", v.Status, v.Summary.StatusCode)
	if len(v.Diagnostics) > 0 {
		msg += ": " + printableText(v.Diagnostics[0].Message)
	}
	return msg + "; result_ref " + r.ResultRef.String()
}

func newPELRunCmd(a *app) *cobra.Command {
	var (
		programArg, paramsArg, schemeArg, hashName string
		inputArgs                                  []string
		outputRaw, quiet, noCache, memoNodes       bool
		limits                                     pel.Limits
		timeout                                    time.Duration
		maxMemory                                  uint64
		maxWork                                    uint64 = defaultWorkBudget
		jobs                                       int
	)
	c := &cobra.Command{
		Use:   "run --program REF [--input REF]... [--params REF] [--output-raw | --quiet] [--hash sha256|blake3]",
		Short: "Run a program by reference and store its outputs, result and trace",
		Long: `Run the program REF on the input artifacts (in --input order) and the optional
global params artifact, all read from the store (PEL/1-SURF, SPECS.md §14).
The outputs, the result artifact and the trace artifact are stored in one
durable batch, under --hash (default: the store's hash). The same request on
the same store content always gives the same references.

Output (stdout):
  result_ref REF
  trace_ref REF
  output_ref[0] REF            one line per output, in root order (OK only)
  status NAME status_code N    NAME: OK, SCHEME_UNSUPPORTED, INVALID_PROGRAM,
                               INVALID_INPUTS or RUNTIME_FAILED
  diagnostic[0] code 0xCCCCCCCC MESSAGE          on failure, one per diagnostic
  store_failure phase P input_index I ref REF error E
                               when a reference did not resolve (P: program,
                               input or params; E: ERR_NOT_FOUND,
                               ERR_INTEGRITY or ERR_UNSUPPORTED)
When the status is not OK, one line also goes to stderr:
  amduat: pel run: program status NAME status_code N: FIRST MESSAGE; result_ref REF

--quiet prints only the output_ref values, one per line (nothing when the
status is not OK); the exit code and the stderr line are unchanged.
--output-raw writes the bytes of the single output to stdout instead; it is
a usage error (exit 2, after the run is stored) when the program has not
exactly one output, and prints nothing on stdout when the status is not OK.
With --json stdout is one object:
  {"status":"OK","status_code":0,"result_ref":"...","trace_ref":"...",
   "output_refs":["..."],"diagnostics":[{"code":N,"message":"..."}],
   "store_failure":{"phase":"input","input_index":0,"ref":"...","error":"ERR_NOT_FOUND"} or null}
--output-raw cannot be combined with --json or --quiet, nor --quiet with --json.

--scheme REF runs under another scheme reference (default SchemeRef_DAG_1);
any other scheme gives SCHEME_UNSUPPORTED.

--max-nodes N and --max-output-bytes N are deterministic bounds (SPECS.md
§14.7): exceeding one is RUNTIME_FAILED (status_code 4 or 5), recorded in the
result like any other run. --timeout D is a wall-time bound: exceeding it
abandons the run between nodes with exit 6, and nothing is stored.
--max-memory and --max-work are operational bounds of this machine, not
part of the request (§12.8): --max-memory bounds the output bytes held in
memory at once (and, in a second account, what WebAssembly nodes hold: their
memories, tables and outputs, §20.8), --max-work (default 64G) the bytes of all node outputs
together, which a run must hash or store even when it holds none of them
(a concat refers to its inputs' bytes). Exceeding either stops the run
before the node that would cross it, with exit 8, and nothing is stored.

A repeated request is answered from the store's action cache (§14.6) without
executing anything (--json reports "cache":"hit", else "miss", or "off"
under --no-cache); --no-cache neither
consults nor records it. --memo-nodes stores each node's outputs as it
completes and reuses identical node computations across runs and programs
(§14.10), so a killed run resumes where it stopped; it costs one durable
write per node. Neither changes any output, result or trace byte.
--json also reports "nodes_reused" and the run's provenance "edge_ref".

--jobs N runs the operations of independent nodes on up to N goroutines
(default 0: GOMAXPROCS, the usable CPUs; 1: one). Nodes are still decided in
canonical order, so no output, result, trace or exit code changes (SPECS.md
§12.10); only costly operations run ahead (SHA-256 of 64 KiB or more), and only
within --max-output-bytes and --max-memory. A remote store's server chooses
for itself.

` + pelExitCodeHelp,
		Example: `  prog=$(amduat pel seed concat)
  a=$(printf 'hello ' | amduat put); b=$(printf world | amduat put)
  amduat pel run --program "$prog" --input "$a" --input "$b"
  amduat pel run --program "$prog" --input "$a" --input "$b" --output-raw`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) (err error) {
			switch {
			case programArg == "":
				return usagef("--program REF is required")
			case outputRaw && a.jsonOut:
				return usagef("--output-raw cannot be combined with --json (stdout carries the output's bytes)")
			case outputRaw && quiet:
				return usagef("--output-raw and --quiet cannot be combined")
			case quiet && a.jsonOut:
				return usagef("--quiet and --json cannot be combined")
			case jobs < 0:
				return usagef("--jobs %d: want 0 (the usable CPUs) or more", jobs)
			}
			if jobs == 0 {
				jobs = runtime.GOMAXPROCS(0)
			}
			req := surf.Request{}
			if req.ProgramRef, err = a.parseRef(programArg); err != nil {
				if st, serr := os.Stat(programArg); serr == nil && st.Mode().IsRegular() || strings.HasSuffix(programArg, ".json") {
					return usagef("--program %s: takes the reference of a stored program, not a file; store it first with `amduat pel build %s` and pass the reference it prints", programArg, programArg)
				}
				return err
			}
			var refArgs []string
			for _, in := range inputArgs {
				if !strings.HasPrefix(in, inputFileMark) {
					refArgs = append(refArgs, in)
				}
			}
			if _, err = a.parseRefs(refArgs); err != nil {
				return err
			}
			if paramsArg != "" {
				if req.ParamsRef, err = a.parseRef(paramsArg); err != nil {
					return err
				}
				req.HasParams = true
			}
			if schemeArg != "" {
				if req.SchemeRef, err = a.parseRef(schemeArg); err != nil {
					return err
				}
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			id, err := a.pelHash(hashName, s.DefaultHash())
			if err != nil {
				return err
			}
			if req.InputRefs, err = a.resolveInputs(c.Context(), s, id, inputArgs); err != nil {
				return err
			}
			req.Limits = limits
			ctx := c.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			var run *surf.Run
			if c, remote := s.(*httpstore.Client); remote {
				alg, _ := asl.LookupHash(id)
				rr := report.RunRequest{ProgramRef: req.ProgramRef, InputRefs: req.InputRefs, Hash: alg.Short,
					MaxNodes: limits.MaxNodes, MaxOutputBytes: limits.MaxOutputBytes, NoCache: noCache, MemoNodes: memoNodes,
					TimeoutMillis: timeout.Milliseconds()}
				if req.HasParams {
					rr.ParamsRef = &req.ParamsRef
				}
				if !req.SchemeRef.IsZero() {
					rr.SchemeRef = &req.SchemeRef
				}
				run, err = runRemote(ctx, c, rr)
			} else {
				reg, regDone, rerr := a.opRegistryBudget(ctx, false, memoryBudget(maxMemory))
				if rerr != nil {
					return rerr
				}
				defer regDone()
				progress, done := a.runProgress()
				run, err = surf.New(s, surf.Options{Hash: id, Registry: reg, NoCache: noCache, NodeMemo: memoNodes, MemoryBudget: memoryBudget(maxMemory), WorkBudget: maxWork,
					Progress: progress, Workers: jobs}).Run(ctx, req)
				done()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				return fail(exitIO, programArg, fmt.Errorf("wall-time bound --timeout %s exceeded; nothing stored: %w", timeout, err))
			}
			if err != nil {
				return failAuto(programArg, err)
			}
			return a.reportRun(c.Context(), s, run, outputRaw, quiet, noCache)
		},
	}
	f := c.Flags()
	f.StringVar(&programArg, "program", "", "reference of the program artifact (required)")
	f.Var(inputValue{&inputArgs, ""}, "input", "reference of an input artifact; repeat in input order")
	f.Var(inputValue{&inputArgs, inputFileMark}, "input-file", "store FILE (- for stdin) and use it as the next input; mixes with --input in command-line order")
	f.StringVar(&paramsArg, "params", "", "reference of the global params artifact (optional)")
	f.StringVar(&schemeArg, "scheme", "", "scheme reference (default: SchemeRef_DAG_1)")
	f.BoolVar(&outputRaw, "output-raw", false, "write the single output's bytes to stdout")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the output references")
	f.StringVar(&hashName, "hash", "", "hash for the stored outputs, result and trace: sha256 or blake3 (default: the store's)")
	f.Uint64Var(&limits.MaxNodes, "max-nodes", 0, "deterministic bound on the nodes evaluated (0: none)")
	f.Var(sizeValue{&limits.MaxOutputBytes}, "max-output-bytes", "deterministic bound on the total bytes of all node outputs (K, M, G, T suffixes; 0: none)")
	f.Var(sizeValue{&maxMemory}, "max-memory", "bytes of node outputs a run may hold at once (and, separately, of its WebAssembly nodes' memories, tables and outputs; K, M, G, T suffixes); above it the run fails with exit 8 and stores nothing (0: the Go memory limit if GOMEMLIMIT is set, else 3/4 of physical memory)")
	f.Var(sizeValue{&maxWork}, "max-work", "bytes all node outputs of a run may total (K, M, G, T suffixes; 0: none); above it the run fails with exit 8 and stores nothing")
	f.IntVar(&jobs, "jobs", 0, "goroutines running independent nodes' operations (0: GOMAXPROCS; 1: sequential); changes no byte")
	f.DurationVar(&timeout, "timeout", 0, "wall-time bound, e.g. 30s (0: none); exceeding it stores nothing")
	f.BoolVar(&noCache, "no-cache", false, "neither consult nor record the action cache")
	f.BoolVar(&memoNodes, "memo-nodes", false, "store and reuse node outputs (resumable runs)")
	return c
}

// reportRun prints a finished run in the chosen mode and returns the exit
// status for its execution status. The output of a cache hit is read from
// the store (verified).
func (a *app) reportRun(ctx context.Context, s asl.Fetcher, run *surf.Run, outputRaw, quiet, noCache bool) error {
	status := run.Result.Value.Status
	ok := status == pel.StatusOK
	switch {
	case a.jsonOut:
		if err := a.printJSON(report.NewRun(run, noCache)); err != nil {
			return fail(exitIO, "stdout", err)
		}
	case outputRaw:
		if ok && len(run.OutputRefs) != 1 {
			return usagef("--output-raw needs a program with exactly one output, this one has %d (run stored: result_ref %s)", len(run.OutputRefs), run.ResultRef)
		}
		if ok {
			if err := a.writeOutput(ctx, s, run); err != nil {
				return err
			}
		}
	case quiet:
		var b bytes.Buffer
		for _, r := range run.OutputRefs {
			fmt.Fprintln(&b, r)
		}
		if _, err := a.stdout.Write(b.Bytes()); err != nil {
			return fail(exitIO, "stdout", err)
		}
	default:
		var b bytes.Buffer
		writeRunText(&b, run)
		if _, err := a.stdout.Write(b.Bytes()); err != nil {
			return fail(exitIO, "stdout", err)
		}
	}
	if ok {
		return nil
	}
	a.warnf("", fmt.Errorf("%s", runFailureLine(run)))
	return exitStatus(pelExitCode(status))
}

// writeOutput writes the bytes of the run's single output to stdout: from
// memory when the run executed, else streamed from the store.
func (a *app) writeOutput(ctx context.Context, s asl.Fetcher, run *surf.Run) error {
	if len(run.Outputs) == 1 {
		if _, err := io.Copy(a.stdout, bytes.NewReader(run.Outputs[0].Bytes)); err != nil {
			return fail(exitIO, "stdout", err)
		}
		return nil
	}
	ref := run.OutputRefs[0]
	rc, _, err := s.Fetch(ctx, ref)
	if err != nil {
		return refErr(ref.String(), err)
	}
	defer rc.Close()
	if _, err := io.Copy(a.stdout, rc); err != nil {
		return refErr(ref.String(), err)
	}
	return nil
}

// runProgress draws the progress of a local run on a terminal's stderr:
// nodes evaluated, then output bytes streamed into the store. Off a
// terminal it returns a nil function. done clears the bar.
func (a *app) runProgress() (progress func(surf.Progress), done func()) {
	if !a.stderrIsTerminal() {
		return nil, func() {}
	}
	var bar *progressBar
	storing := false
	newBar := func(max int64, desc string, bytes bool) {
		if bar != nil {
			bar.finish()
		}
		bar = newProgressBar(a.stderr, desc, max, bytes)
	}
	progress = func(p surf.Progress) {
		switch {
		case p.BytesTotal > 0:
			if !storing {
				storing = true
				newBar(int64(p.BytesTotal), "store outputs", true)
			}
			bar.set(int64(p.BytesWritten))
		default:
			if bar == nil {
				newBar(max(int64(p.NodesTotal), 1), "nodes", false)
			}
			bar.set(int64(p.NodesDone))
		}
	}
	return progress, func() {
		if bar != nil {
			bar.finish()
		}
	}
}
