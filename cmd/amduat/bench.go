package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/bench"
)

func init() { addCommand(newBenchCmd) }

// childReport is what `amduat bench --child GROUP` prints on stdout.
type childReport struct {
	RSSMethod string      `json:"rss_method"`
	Rows      []bench.Row `json:"rows"`
}

func newBenchCmd(a *app) *cobra.Command {
	var (
		quick   bool
		only    []string
		dir     string
		child   string
		profile string
	)
	c := &cobra.Command{
		Use:   "bench [--quick] [--only NAME,...] [--dir DIR]",
		Short: "Measure the store, the CLI and the engine side by side with baselines",
		Long: `Measure throughput, latency and memory, each figure beside a baseline taken
in the same run on the same deterministic inputs, and check it against its
target. The groups, in order:

  large-random  1 GiB incompressible artifact: streaming Put and verified get
                against SHA-256 of the same bytes; peak RSS (target 128 MiB)
  large-text    the same with a 1 GiB compressible (text-like) artifact, and
                its stored size against zstd's fastest level
  small         100,000 artifacts of 1 KiB: PutBatch (batches of 1,000, then of
                10,000) and random get against SHA-256 of the same ArtifactBytes
  cli           amduat put of 20,000 files in one call against
                git hash-object -w --stdin-paths (skipped without git)
  startup       process start: amduat version against a Go hello-world, has
                and get of 1 KiB against git cat-file; the floors (built
                from the source tree the bench runs in): deps-floor and
                store-floor, programs linking only Pebble and minio-go, and
                only Pebble, against the same hello-world; store-open-floor,
                the second opening the store and reading a key, against
                git cat-file -e
  snapshot      put -r of a directory of many small files against put
                --stdin-paths of the same files, and get -r against cp -r
  exec          1M-node chain and fan-in: canonical ordering, Exec_DAG overhead
                beyond direct operation calls, bytes allocated per node
  surface       p50/p99 latency of surface runs of a 100-node program, and of
                action-cache hits
  lazy          peak RSS of amduat pel run over large inputs: concat(x, x) of
                a 300 MB input (with and without --memo-nodes) and a run whose
                inputs and output total 1 GiB (target 128 MiB each)
  parallel      64 hash nodes over 1 MiB inputs, and over 4 KiB: parallel
                evaluation (GOMAXPROCS workers) against sequential, same run
  hostile       hostile programs (a 5,000-input concat of a 1 MiB const, a
                64-node doubling chain, a 1M-node chain and fan-in), without
                and with limits, and hostile WebAssembly nodes (memory grown
                to 65,535 and 65,536 pages, 320 MiB and 1.6 GiB writers, 64
                grown tables, four 4 GiB nodes, a deep recursion), each in
                its own pel run process under a 1 GiB memory budget: status,
                time and peak RSS
  server        amduat serve on loopback against the embedded store: PutBatch
                and get of 1 KiB artifacts with 1, 16 and 64 clients, pel run
                p50/p99, a 64-client load test checking every answer, and a
                1 GiB put and get (server and client peak RSS)
  wasm          amduat.wasm.run: per-call overhead of a trivial module against
                a kernel operation, a Go-written word count over 64 MiB against
                the same Go code native, first-call compile time of the examples
  s3            asl/s3store against a MinIO it starts on loopback (skipped
                without minio): PutBatch and random get of up to 4,096
                artifacts of 1 KiB, put and get of 1 GiB, each against the raw
                minio-go client on the same server and bytes; surface run
                p50/p99, and an action-cache hit through a second server,
                each beside its floor: the rounds of requests it must wait
                for, sent by the raw client (the run's also in one round)

--quick shrinks the work (64 MiB, 10,000 artifacts, 2,000 files, 100,000
nodes, 50 runs, a 256 MiB budget for the hostile runs) to run in well under
a minute. --only runs some groups ("large" selects both large groups). Temporary stores and files go under --dir
(default: the system temporary directory) and are removed afterwards. Each
group runs in a child process of this executable, so that the peak resident
memory of one group is not inflated by what another left behind.

--cpuprofile DIR writes each group's CPU profile to DIR/GROUP.pprof; samples
carry the pprof label phase (hash, put, get, disk, zstd, order, direct, planrun,
run, commit, cache-hit, ...), so go tool pprof -tagfocus=phase=put isolates one
measurement; the server group's in-process servers label the work of each
request with its client's phase as serve:PHASE (serve:get-vs-files-server).

The command prints a table (with --json, one object with a "rows" array) and
exits 0 whether or not targets are met: it measures, it does not gate.`,
		Example: `  amduat bench --quick
  amduat bench --only exec,surface --json
  amduat bench --dir /mnt/fast-disk
  amduat bench --only small --cpuprofile prof && go tool pprof -top prof/small.pprof`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			sizes := bench.FullSizes()
			if quick {
				sizes = bench.QuickSizes()
			}
			if child != "" {
				return a.benchChild(c.Context(), child, sizes, dir, profile)
			}
			groups, err := bench.Select(only)
			if err != nil {
				return usageErr(err)
			}
			if dir == "" {
				dir = os.TempDir()
			}
			top, err := os.MkdirTemp(dir, "amduat-bench-")
			if err != nil {
				return fail(exitIO, dir, err)
			}
			defer os.RemoveAll(top)
			exe, err := os.Executable()
			if err != nil {
				return fail(exitIO, "", fmt.Errorf("finding this executable to run the groups: %w", err))
			}
			if profile != "" {
				if err := os.MkdirAll(profile, 0o755); err != nil {
					return fail(exitIO, profile, err)
				}
			}
			report := bench.NewReport(quick, sizes)
			for i, g := range groups {
				fmt.Fprintf(a.stderr, "bench: [%d/%d] %s: %s\n", i+1, len(groups), g.Name, g.Title)
				cr, err := runBenchChild(c.Context(), a, exe, g.Name, quick, top, profile)
				if err != nil {
					return err
				}
				report.RSSMethod = cr.RSSMethod
				report.Rows = append(report.Rows, cr.Rows...)
			}
			if a.jsonOut {
				return a.printJSON(report)
			}
			if err := report.WriteTable(a.stdout); err != nil {
				return fail(exitIO, "stdout", err)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&quick, "quick", false, "smaller workloads (64 MiB artifacts, 10,000 small artifacts, 2,000 files, 100,000 nodes, 50 runs, a 256 MiB budget for the hostile runs)")
	c.Flags().StringSliceVar(&only, "only", nil, "run only these groups: "+strings.Join(bench.GroupNames(), ", ")+` ("large" selects both large groups)`)
	c.Flags().StringVar(&dir, "dir", "", "directory for temporary stores and files (default: the system temporary directory)")
	c.Flags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of each group to DIR/GROUP.pprof (for go tool pprof)")
	c.Flags().StringVar(&child, "child", "", "run one group in this process and print its rows as JSON (internal)")
	_ = c.Flags().MarkHidden("child")
	return c
}

// runBenchChild runs one group in a child process and decodes its rows. The
// child's progress lines go to stderr. When the child cannot measure its own
// peak RSS per window, each row gets the child's whole-process peak.
func runBenchChild(ctx context.Context, a *app, exe, group string, quick bool, dir, profile string) (childReport, error) {
	args := []string{"bench", "--child", group, "--dir", dir}
	if quick {
		args = append(args, "--quick")
	}
	if profile != "" {
		args = append(args, "--cpuprofile", profile)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, a.stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return childReport{}, ctx.Err()
		}
		return childReport{}, fail(exitIO, group, fmt.Errorf("benchmark child process: %w", err))
	}
	var cr childReport
	d := json.NewDecoder(&out)
	d.DisallowUnknownFields()
	if err := d.Decode(&cr); err != nil {
		return childReport{}, fail(exitIO, group, fmt.Errorf("decoding the child's rows: %w", err))
	}
	if cr.RSSMethod == bench.RSSNone {
		if peak := bench.ChildMaxRSS(cmd.ProcessState); peak != nil {
			cr.RSSMethod = "child-maxrss"
			for i := range cr.Rows {
				if cr.Rows[i].PeakRSS == nil {
					cr.Rows[i].PeakRSS = peak
				}
			}
		}
	}
	return cr, nil
}

// benchChild runs one group in this process and prints its rows as JSON;
// with a profile directory it writes the group's CPU profile there.
func (a *app) benchChild(ctx context.Context, name string, sizes bench.Sizes, dir, profile string) (err error) {
	g, ok := bench.Lookup(name)
	if !ok {
		return usagef("unknown benchmark group %q (known: %s)", name, strings.Join(bench.GroupNames(), ", "))
	}
	if profile != "" {
		path := filepath.Join(profile, name+".pprof")
		f, err := os.Create(path)
		if err != nil {
			return fail(exitIO, path, err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fail(exitIO, path, err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fail(exitIO, path, cerr)
			}
		}()
	}
	env := &bench.Env{Sizes: sizes, Dir: dir, Log: a.stderr}
	if exe, err := os.Executable(); err == nil {
		env.AmduatBin = exe
	}
	rows, err := bench.RunGroup(ctx, g, env)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fail(exitIO, name, err)
	}
	return a.printJSON(childReport{RSSMethod: bench.RSSMethod(), Rows: rows})
}
