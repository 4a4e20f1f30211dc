package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/closure"
)

func init() { addCommand(newGCCmd) }

func newGCCmd(a *app) *cobra.Command {
	var (
		dry        bool
		keepWithin time.Duration
		keepRuns   int
		compact    float64
	)
	c := &cobra.Command{
		Use:   "gc [--dry-run] [--keep-within DURATION] [--keep-runs N] [--compact-below F]",
		Short: "Delete what no pin reaches and give the space back",
		Long: `Collect garbage (SPECS.md §6.4, "Garbage collection"): mark everything the
pins reach (SPECS.md §19.6), and with --keep-within DURATION (e.g. 168h) or
--keep-runs N also what the runs of the run log recorded within DURATION, or
the newest N runs, reach; delete every other artifact, and the index entries
that name a deleted artifact (action cache, node memo, trace index,
provenance index, run log). Then give the space back: every pack whose live
fraction is below --compact-below (default 0.5; negative: none) is
rewritten and deleted, and the index is compacted.

--dry-run deletes nothing and reports what would go. gc is crash-safe: after
a crash, nothing reachable is lost and running gc again finishes the job.
An artifact put or read by the same process while gc runs is kept.

Prints "deleted N artifacts (B bytes), E index entries; reclaimed R bytes
(packs P -> Q bytes)". Needs an embedded store (exit 5 against a server).`,
		Example: `  amduat gc --dry-run
  amduat pin add release-1 REF && amduat gc
  amduat gc --keep-within 168h`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) (err error) {
			if keepRuns < 0 || keepWithin < 0 {
				return usagef("--keep-runs and --keep-within must not be negative")
			}
			s, err := a.openEmbedded("gc", false)
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			rep, err := closure.Collect(c.Context(), s, closure.GCOptions{
				DryRun: dry, KeepWithin: keepWithin, KeepRuns: keepRuns, CompactBelow: compact,
			})
			if err != nil {
				return failAuto("", err)
			}
			if a.jsonOut {
				return a.printJSON(rep)
			}
			entries := 0
			for _, n := range rep.Entries {
				entries += n
			}
			verb := "deleted"
			if dry {
				verb = "would delete"
			}
			a.printf("%s %d of %d artifacts (%d bytes), %d index entries; reached %d from %d roots\n",
				verb, rep.Deleted, rep.Stored, rep.DeletedBytes, entries, rep.Reached, rep.Roots)
			if !dry {
				a.printf("packs: %d compacted, %d deleted, %d artifacts rewritten; %d -> %d bytes (reclaimed %d) in %s\n",
					rep.PacksCompacted, rep.PacksDeleted, rep.Rewritten, rep.PackBytes[0], rep.PackBytes[1],
					rep.PackBytes[0]-rep.PackBytes[1], rep.Duration.Round(time.Millisecond))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&dry, "dry-run", false, "report what would be deleted; delete nothing")
	c.Flags().DurationVar(&keepWithin, "keep-within", 0, "also keep what the runs logged within DURATION reach")
	c.Flags().IntVar(&keepRuns, "keep-runs", 0, "also keep what the newest N logged runs reach")
	c.Flags().Float64Var(&compact, "compact-below", 0, "rewrite packs whose live fraction is below F (0: 0.5; negative: none)")
	return c
}
