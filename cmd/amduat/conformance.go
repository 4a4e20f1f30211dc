package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/conformance"
	"github.com/amduat/amduat/vectors"
)

func init() { addCommand(newConformanceCmd) }

type conformanceResult struct {
	Source  string               `json:"source"`
	Files   int                  `json:"files"`
	Passed  int                  `json:"passed"`
	Failed  int                  `json:"failed"`
	Results []conformance.Result `json:"results"`
}

func newConformanceCmd(a *app) *cobra.Command {
	group := &cobra.Command{
		Use:   "conformance",
		Short: "Run or regenerate the conformance vectors",
		Long: `The conformance vectors (SPECS.md §7, files vectors/*.json) are
language-neutral test cases: inputs and the exact bytes and references an
implementation must produce. "run" checks this implementation against them;
"generate" rewrites them from the Go case tables.`,
	}
	var verbose bool
	runCmd := &cobra.Command{
		Use:   "run [DIR]",
		Short: "Check this implementation against the vectors",
		Long: `Check every vector in DIR/*.json (files in lexical order, vectors in file
order), or, without DIR, the copy of the project's vectors/ embedded in this
binary. Failing vectors are printed as "FAIL ID (FILE): REASON"; -v also
prints "ok ID" for passing ones. The last line is exactly

  N passed, N failed

Exit 0 when no vector failed, 1 when any failed, 6 when the files cannot be
read.`,
		Args: rangeArgs(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			res := conformanceResult{Source: "embedded", Results: []conformance.Result{}}
			report := func(r conformance.Result) {
				if a.jsonOut {
					res.Results = append(res.Results, r)
					return
				}
				if !r.Pass {
					a.printf("FAIL %s (%s): %s\n", r.ID, r.File, r.Reason)
				} else if verbose {
					a.printf("ok %s\n", r.ID)
				}
			}
			var (
				sum conformance.Summary
				err error
			)
			if len(args) == 1 {
				res.Source = args[0]
				sum, err = conformance.RunDir(c.Context(), args[0], report)
			} else {
				sum, err = conformance.Run(c.Context(), vectors.FS(), report)
			}
			if err != nil {
				return failAuto(res.Source, err)
			}
			res.Files, res.Passed, res.Failed = sum.Files, sum.Passed, sum.Failed
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				a.printf("%s\n", sum)
			}
			if sum.Failed > 0 {
				return exitStatus(exitNegative)
			}
			return nil
		},
	}
	runCmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also list passing vectors")

	genCmd := &cobra.Command{
		Use:   "generate DIR [CATEGORY...]",
		Short: "Rewrite the vector files in DIR from the Go case tables (deliberate)",
		Long: `Write DIR/<category>.json for every vector category (or only for the
CATEGORYs given, e.g. asl.artifact), computing every expected value with this
implementation. This REPLACES the frozen expectations: run it only when the
specification deliberately changed (a change of bytes changes SPECS.md and the
vectors together), then review the diff, e.g.

  amduat conformance generate vectors && git diff vectors/

Tests never regenerate; they check the checked-in files.`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			paths, err := conformance.Generate(args[0], args[1:]...)
			if errors.Is(err, conformance.ErrUnknownCategory) {
				return usageErr(err)
			}
			if err != nil {
				return failAuto(args[0], err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Files []string `json:"files"`
				}{paths})
			}
			for _, p := range paths {
				a.printf("wrote %s\n", p)
			}
			return nil
		},
	}
	group.AddCommand(runCmd, genCmd, newConformanceTestCmd(a), newConformanceTesteeCmd(a))
	return group
}
