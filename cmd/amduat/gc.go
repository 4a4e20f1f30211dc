package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/closure"
)

func init() { addCommand(newGCCmd) }

func newGCCmd(a *app) *cobra.Command {
	var (
		dry        bool
		keepWithin time.Duration
		keepRuns   int
		compact    float64
		olderThan  time.Duration
		grace      time.Duration
		packLoose  bool
	)
	c := &cobra.Command{
		Use:   "gc [--dry-run] [--keep-within DURATION] [--keep-runs N] [--compact-below F] | gc --store s3://… [--dry-run] [--grace DURATION] [--older-than DURATION] [--pack-loose]",
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

Prints "deleted N of S artifacts (B bytes), E index entries; reached M
from R roots" ("would delete …" with --dry-run: N of the S stored
artifacts no root reaches, B their stored bytes, E the index entries naming
them, M the references the mark reached from the R roots), then (not with --dry-run) "packs: C compacted, D deleted, W
artifacts rewritten; P -> Q bytes (reclaimed R) in T"; JSON: the report.

Against a server (--store http://…; a token with the admin scope) the
server collects its own store while it keeps serving, and the output is
the same; what clients put or read meanwhile is kept. A directory that
a running server holds is refused (exit 6) with the command that works:
amduat gc --store http://HOST:PORT.

On a bucket (--store s3://…, SPECS.md §6.7, "Garbage collection") gc runs
while other servers keep reading and writing the bucket: it marks what the
pins (and --keep-within/--keep-runs) reach and deletes every other artifact
last written more than --grace (default 24h) before the mark began; a
writer that re-puts or pins an artifact during the sweep keeps it (the
artifact's shard is skipped). One gc at a time per bucket (another: exit
6). It then sweeps what interrupted puts left: part objects no manifest
names, staging objects and incomplete uploads of layout version 1, each
older than --older-than (default 24h, which must exceed the longest put).
It prints "deleted N of L artifacts (B bytes); reached R from K roots (P
pins); kept Y younger than G and C in S shards writers held", then "swept
N parts (B bytes) and S staging leftovers; kept R named parts, Y younger
than D"; JSON: the report. A damaged manifest is reported on stderr and
makes the exit code 4; the sweep still finishes.

On a bucket, gc also repacks (SPECS.md §6.7, "Packs in a collection"): a
pack whose artifacts are all unreachable is removed, and one mostly dead,
or small, has its live records copied into new packs before it is
removed; it prints "packs: N removed, B bytes carried into new packs, K
kept (shards writers held)". With --pack-loose it first moves what layout
version 3 and before wrote into packs, in place: the reachable artifact
objects older than --grace and every loose index entry ("moved N loose
artifacts and E index entries into packs"); killed at any moment, nothing
is lost, and running it again goes on where it stopped.`,
		Example: `  amduat gc --dry-run
  amduat pin add release-1 REF && amduat gc
  amduat gc --keep-within 168h
  amduat --store 's3://amduat/main?endpoint=127.0.0.1:9000' gc --grace 24h`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) (err error) {
			if keepRuns < 0 || keepWithin < 0 {
				return usagef("--keep-runs and --keep-within must not be negative")
			}
			if isS3(a.storeDir) {
				if c.Flags().Changed("compact-below") {
					return usagef("--compact-below applies to an embedded store only (a bucket gives space back as it deletes)")
				}
				return a.gcBucket(c, dry, grace, olderThan, keepWithin, keepRuns, packLoose)
			}
			if c.Flags().Changed("older-than") || c.Flags().Changed("grace") || packLoose {
				return usagef("--older-than, --grace and --pack-loose apply to a bucket (s3://…) only")
			}
			s, err := a.openGC()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			rep, err := collect(c.Context(), s, closure.GCOptions{
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
	c.Flags().DurationVar(&olderThan, "older-than", s3store.DefaultSweepAge, "on a bucket: sweep only leftovers older than DURATION")
	c.Flags().BoolVar(&packLoose, "pack-loose", false, "on a bucket: first move the artifact objects and index entries of layout version 3 and before into packs")
	c.Flags().DurationVar(&grace, "grace", s3store.DefaultGrace, "on a bucket: keep unreachable artifacts written within DURATION before the mark")
	return c
}
