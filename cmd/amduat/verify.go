package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
)

func init() { addCommand(newVerifyCmd) }

type verifyFailure struct {
	Ref       asl.Reference `json:"ref"`
	Error     string        `json:"error"`
	Integrity bool          `json:"integrity"`
}

type verifyResult struct {
	Stored   int64           `json:"stored"`
	Selected int64           `json:"selected"`
	Checked  int64           `json:"checked"`
	Bytes    int64           `json:"bytes"`
	Sample   *string         `json:"sample"`
	Seed     string          `json:"seed"`
	Corrupt  int             `json:"corrupt"`
	Failed   int             `json:"failed"`
	Failures []verifyFailure `json:"failures"`
	// Damage lists what the store could not enumerate (an unreadable
	// index record, a damaged table's key range), each also counted in
	// Corrupt (SPECS.md §16.3).
	Damage []string `json:"damage"`
}

func newVerifyCmd(a *app) *cobra.Command {
	var (
		sampleArg string
		seed      string
		workers   int
		repair    bool
		tag       typeTagValue
		hashName  string
	)
	c := &cobra.Command{
		Use:   "verify [--sample N|P%] [--seed S] | verify --repair [--type-tag N] [--hash H] FILE...",
		Short: "Re-hash stored artifacts and report corruption",
		Long: `Read every stored artifact (or a deterministic sample), re-hash its bytes and
compare with its reference and its index entry. Each failure is reported on
stderr as one line; a summary line goes to stdout:

  checked C of S artifacts (B bytes): X corrupt, Y failed

--sample N checks the N artifacts whose sample keys are smallest; --sample P%
checks each artifact whose sample key lies in the lowest P% of the key space
(and, when that selects none of a non-empty store, the one with the
smallest key).
The sample key of an artifact is the first 8 bytes (big-endian) of
SHA-256(u32 len(seed) || seed || ReferenceBytes): the same store and seed
always select the same artifacts, and another --seed selects another subset.

Damage met while listing the store (an unreadable index record, a table of
the index whose blocks cannot be read) does not stop verify: it is reported
on stderr, counted as corrupt and listed under "damage" in --json, and
everything else is still checked. A store that cannot be opened at all
because its metadata is damaged is exit 4 too: copy what can be read into a
new store with ` + "`amduat salvage --to DIR`" + `.

--repair FILE... reads each FILE (with --type-tag and --hash as for put),
and when the store holds its artifact but the stored copy is damaged, writes
a fresh copy and points the store at it (SPECS.md §6.4, "Repair"; on a
bucket the damaged object is overwritten, §6.7); it prints
"REF STATE FILE", STATE being ok (intact, nothing written), repaired, or
stored (was not stored: put). A plain put of the same bytes repairs too.

Exit 0 when everything checked is intact, 4 when corruption was found
(integrity failures: damaged or missing data), 6 when only other failures
occurred (I/O errors, unsupported hash). A progress bar is drawn on stderr
when stderr is a terminal.`,
		Example: `  amduat verify
  amduat verify --sample 10%
  amduat verify --sample 1000 --seed "$(date +%F)"`,
		RunE: func(c *cobra.Command, args []string) (err error) {
			if repair {
				if len(args) == 0 {
					return usagef("--repair needs at least one FILE")
				}
				return a.verifyRepair(c, args, tag, hashName)
			}
			if len(args) > 0 {
				return usagef("verify takes no arguments without --repair, got %d", len(args))
			}
			opts := aslutil.VerifyOptions{Workers: workers}
			res := verifyResult{Seed: seed, Failures: []verifyFailure{}, Damage: []string{}}
			if sampleArg != "" {
				smp, err := aslutil.ParseSample(sampleArg)
				if err != nil {
					return usageErr(fmt.Errorf("--sample: %w", err))
				}
				smp.Seed = seed
				opts.Sample = &smp
				str := smp.String()
				res.Sample = &str
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				if errors.Is(err, asl.ErrIntegrity) {
					return fmt.Errorf("%w; copy what can still be read into a new store with `amduat salvage --to DIR`", err)
				}
				return err
			}
			defer closeStore(s, a.storeDir, &err)

			var bar *progressBar
			var progress func(aslutil.Progress)
			if a.stderrIsTerminal() {
				progress = func(p aslutil.Progress) {
					if bar == nil {
						bar = newProgressBar(a.stderr, "verify", max(p.TotalBytes, 1), true)
					}
					bar.set(p.Bytes)
				}
			}
			rep, verr := aslutil.Verify(c.Context(), s, opts, progress)
			if bar != nil {
				bar.finish()
			}
			res.Stored, res.Selected, res.Checked, res.Bytes = rep.Stored, rep.Selected, rep.Checked, rep.Bytes
			for _, f := range rep.Failures {
				res.Failures = append(res.Failures, verifyFailure{Ref: f.Ref, Error: oneLine(f.Err.Error()), Integrity: f.Integrity})
				if f.Integrity {
					res.Corrupt++
				} else {
					res.Failed++
				}
				a.warnf(f.Ref.String(), f.Err)
			}
			for _, d := range rep.Damage {
				res.Damage = append(res.Damage, oneLine(d.Error()))
				res.Corrupt++
				a.warnf("", d)
			}
			if verr != nil {
				return failAuto("", verr)
			}
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				a.printf("checked %d of %d artifacts (%d bytes): %d corrupt, %d failed\n",
					res.Checked, res.Stored, res.Bytes, res.Corrupt, res.Failed)
			}
			switch {
			case res.Corrupt > 0:
				return exitStatus(exitIntegrity)
			case res.Failed > 0:
				return exitStatus(exitIO)
			}
			return nil
		},
	}
	c.Flags().StringVar(&sampleArg, "sample", "", "check only N artifacts, or P% of them (deterministic selection)")
	c.Flags().StringVar(&seed, "seed", "", "vary the sample's selection deterministically")
	c.Flags().IntVar(&workers, "workers", 0, "artifacts verified in parallel (default: number of CPUs)")
	c.Flags().BoolVar(&repair, "repair", false, "replace the damaged stored copies of the artifacts of FILE...")
	c.Flags().Var(&tag, "type-tag", "with --repair: type tag of the FILE artifacts")
	c.Flags().StringVar(&hashName, "hash", "", "with --repair: hash of the FILE artifacts (default: the store's)")
	return c
}
