package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/surf"
)

func init() { addPELCommand(newPELVerifyCmd) }

func newPELVerifyCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "verify RESULT_REF",
		Short: "Replay a stored run and check that it reproduces byte for byte",
		Long: `Load the result RESULT_REF, re-execute its request (program, inputs, params
and limits, under the result's hash) from the stored artifacts, and compare
every output, the result and the trace with what the store holds
(SPECS.md §14.8). Nothing is stored.

Output: "result RESULT_REF" and "trace_ref REF" (or "trace_ref none"), then
either "ok: outputs, result and trace are byte-identical" (exit 0) or the
first difference, in the order outputs, result, trace:
  mismatch ARTIFACT stored REF|none replayed REF|none: DETAIL
(exit 1). A missing or undecodable result is an error (exit 3, 4 or 2).
JSON: {"result_ref","trace_ref","verified":bool,
"mismatch":{"artifact","stored","replayed","detail"} or null}.`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			ref, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			art, err := asl.Get(c.Context(), s, ref, 0)
			if err != nil {
				return refErr(args[0], err)
			}
			if _, err := surf.DecodeResultArtifact(art); err != nil {
				return undecodable(ref, "result", err)
			}
			reg, done, err := a.opRegistry(c.Context(), false)
			if err != nil {
				return err
			}
			defer done()
			v, err := surf.New(s, surf.Options{Registry: reg}).Verify(c.Context(), ref)
			if err != nil {
				return refErr(args[0], err)
			}
			j := report.NewVerification(ref, v)
			if a.jsonOut {
				if err := a.printJSON(j); err != nil {
					return fail(exitIO, "stdout", err)
				}
			} else {
				a.printf("result %s\ntrace_ref %s\n", ref, optionalRefText(v.TraceRef, !v.TraceRef.IsZero()))
				if m := v.Mismatch; m != nil {
					a.printf("mismatch %s stored %s replayed %s: %s\n", m.Artifact, optionalRefText(m.Stored, !m.Stored.IsZero()),
						optionalRefText(m.Replayed, !m.Replayed.IsZero()), printableText([]byte(m.Detail)))
				} else {
					a.printf("ok: outputs, result and trace are byte-identical\n")
				}
			}
			if v.Mismatch != nil {
				a.warnf(args[0], fmt.Errorf("the stored run does not reproduce: %s", v.Mismatch.Artifact))
				return exitStatus(exitNegative)
			}
			return nil
		},
	}
}
