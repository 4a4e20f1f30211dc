package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/conformance"
	"github.com/amduat/amduat/vectors"
)

// The conformance runner and the Go testee (SPECS.md §21).

type conformanceTestResult struct {
	conformance.TestReport
	OK       bool                     `json:"ok"`
	Failures []conformance.CaseResult `json:"failures"`
}

func newConformanceTestCmd(a *app) *cobra.Command {
	var (
		cats      []string
		xfFile    string
		generate  int
		seed      uint64
		vecDir    string
		noVectors bool
		failDir   string
		timeout   time.Duration
		verbose   bool
	)
	c := &cobra.Command{
		Use:   "test [flags] -- COMMAND [ARG...]",
		Short: "Drive another implementation (a testee) through the vectors and generated cases",
		Long: `Start COMMAND as a testee speaking the protocol amduat-testee/1 (SPECS.md
§21: length-prefixed JSON frames on its stdin and stdout), send it every
embedded vector (or those of --vectors DIR), then --generate N differential
cases drawn from --seed S (valid and mutated inputs of every kind, with the
answers this implementation gives), and compare each answer with the
expected one. Kinds the testee does not declare in its hello are skipped,
never passed.

Prints one line per category and a total:

  asl.artifact     48 passed, 0 failed, 0 skipped, 0 expected failures, 0 unexpected passes

--expected-failures FILE lists case ids (or patterns like *.blake3), one a
line, # starts a comment: listed cases that fail are counted as expected
failures; listed cases that pass are unexpected passes. Each unexpected
failure is written to --failures DIR as a standalone vector file, to rerun
with --vectors DIR (or to check Go with "amduat conformance run DIR").

Exit 0 when no case failed unexpectedly and no listed case passed, 1
otherwise, 2 on bad flags, 6 when the testee cannot be started or breaks the
protocol.`,
		Example: `  amduat conformance test -- amduat conformance testee
  amduat conformance test --generate 10000 --seed 7 -- python3 conformance/testee-python/testee.py
  amduat conformance test --categories asl,bundle --expected-failures xfail.txt -- ./my-testee`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() != 0 {
				return usageErr(errors.New("put the testee command after --, e.g. amduat conformance test -- ./testee"))
			}
			if generate < 0 {
				return usageErr(fmt.Errorf("--generate %d: want a count >= 0", generate))
			}
			opts := conformance.TestOptions{Command: args, Generate: generate, Seed: seed, FailDir: failDir,
				Timeout: timeout, Stderr: os.Stderr}
			for _, s := range cats {
				for _, p := range strings.Split(s, ",") {
					if p = strings.TrimSpace(p); p != "" {
						opts.Categories = append(opts.Categories, p)
					}
				}
			}
			switch {
			case noVectors && vecDir != "":
				return usageErr(errors.New("--no-vectors and --vectors exclude each other"))
			case vecDir != "":
				st, err := os.Stat(vecDir)
				if err != nil {
					return failAuto(vecDir, err)
				}
				if !st.IsDir() {
					return usageErr(fmt.Errorf("--vectors %s is not a directory", vecDir))
				}
				opts.Vectors = os.DirFS(vecDir)
			case !noVectors:
				opts.Vectors = vectors.FS()
			}
			if xfFile != "" {
				data, err := os.ReadFile(xfFile)
				if err != nil {
					return failAuto(xfFile, err)
				}
				if opts.ExpectedFailures, err = conformance.ParseExpectedFailures(data); err != nil {
					return usageErr(fmt.Errorf("%s: %w", xfFile, err))
				}
			}
			res := conformanceTestResult{Failures: []conformance.CaseResult{}}
			opts.Report = func(r conformance.CaseResult) {
				switch {
				case r.Outcome == conformance.OutcomeFail || r.Outcome == conformance.OutcomeUnexpectedPass:
					res.Failures = append(res.Failures, r)
					where := ""
					if r.File != "" {
						where = " [" + r.File + "]"
					}
					a.printf("%s %s (%s): %s%s\n", strings.ToUpper(r.Outcome), r.ID, r.Kind, r.Reason, where)
				case verbose:
					a.printf("%s %s\n", r.Outcome, r.ID)
				}
			}
			rep, err := conformance.Test(c.Context(), opts)
			if err != nil {
				if errors.Is(err, conformance.ErrTestee) {
					return &cliError{code: exitIO, subject: args[0], err: err}
				}
				return failAuto("", err)
			}
			res.TestReport, res.OK = rep, rep.OK()
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				a.printf("testee %s: %d cases (%d generated, seed %d)\n", rep.Implementation, rep.Cases, rep.Generated, rep.Seed)
				for _, cc := range rep.Categories {
					a.printf("  %-16s %s\n", cc.Category, cc)
				}
				a.printf("  %-16s %s\n", "total", rep.Total)
			}
			if !rep.OK() {
				return exitStatus(exitNegative)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringSliceVar(&cats, "categories", nil, "run only these categories or category prefixes (comma-separated, e.g. asl,bundle)")
	f.StringVar(&xfFile, "expected-failures", "", "`FILE` listing case ids or patterns expected to fail")
	f.IntVar(&generate, "generate", 0, "also run `N` generated differential cases")
	f.Uint64Var(&seed, "seed", 1, "`S`eed of the generated cases")
	f.StringVar(&vecDir, "vectors", "", "run the vector files of `DIR` instead of the embedded vectors")
	f.BoolVar(&noVectors, "no-vectors", false, "run no vector files (only generated cases)")
	f.StringVar(&failDir, "failures", "conformance-failures", "write each failing case to `DIR` as a vector file (\"\" for none)")
	f.DurationVar(&timeout, "timeout", time.Minute, "kill and restart a testee that takes longer than `D` to answer")
	f.BoolVarP(&verbose, "verbose", "v", false, "also list passing and skipped cases")
	return c
}

func newConformanceTesteeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "testee",
		Short: "Serve this implementation as a testee on stdin/stdout (protocol amduat-testee/1)",
		Long: `Answer amduat-testee/1 requests (SPECS.md §21) read from standard input
on standard output until standard input ends: the Go implementation as one
testee among others, for "amduat conformance test -- amduat conformance
testee". It declares every kind and the registries kernel+test/1 and
kernel+wasm/1. --json has no effect (the protocol is JSON already).

Exit 0 when standard input ends, 6 on a malformed frame.`,
		Example: `  amduat conformance test --generate 100000 -- amduat conformance testee`,
		Args:    rangeArgs(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			if err := conformance.ServeTestee(c.Context(), c.InOrStdin(), os.Stdout); err != nil {
				return &cliError{code: exitIO, subject: "stdin", err: err}
			}
			return nil
		},
	}
}
