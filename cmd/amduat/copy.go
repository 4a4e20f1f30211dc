package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/closure"
)

func init() { addCommand(newCopyCmd) }

type copyResult struct {
	From      string          `json:"from"`
	To        string          `json:"to"`
	Artifacts uint64          `json:"artifacts"`
	Bytes     uint64          `json:"bytes"`
	Absent    []asl.Reference `json:"absent"`
	// Present counts the artifacts --to held already: neither read nor
	// sent, not in Artifacts.
	Present uint64 `json:"present"`
}

// copyBatch bounds one GetBatch/PutBatch round of small artifacts.
const (
	copyBatchCount = 512
	copyBatchBytes = 16 << 20
	copySmallMax   = 1 << 20
	// copyHasParallel bounds the presence checks of one batch in flight.
	copyHasParallel = 16
)

func newCopyCmd(a *app) *cobra.Command {
	var (
		from, to    string
		all, within bool
	)
	c := &cobra.Command{
		Use:   "copy --from STORE --to STORE [REF... | --all] [--closure]",
		Short: "Copy artifacts from one store to another (directory, http://, s3://)",
		Long: `Copy the artifacts REF... (with --closure, everything they reach, SPECS.md
§19.6; with --all, every stored artifact) from the store --from to the store
--to. Either may be a store directory, a server (http://…) or a bucket
(s3://…, SPECS.md §6.7); --to must exist (amduat init). Every byte is read
verified (SPECS.md §6.2) and every reference the destination acknowledges is
checked; artifacts up to 1 MiB go in batches (asl.GetBatch, PutBatch), larger
ones stream with bounded memory. Only what the destination lacks is read
and sent (one /v1/artifacts/missing request per batch to a server, a
presence check of each artifact elsewhere), so a copy that was interrupted
can simply be run again. The derived index entries of traces and provenance edges (SPECS.md
§6.5) are written with them (a server, which refuses index writes, derives
them itself from the traces and edges it receives, SPECS.md §18.4); the
action cache is not copied. With --closure a reached reference that is
not stored is left out with a warning line; without it every REF must be
stored (exit 3 otherwise).
Text: "copied N artifacts (B bytes) from FROM to TO; P were there already".
JSON: {"from", "to", "artifacts", "bytes", "absent", "present"}.`,
		Example: `  amduat copy --from /srv/amduat --to 's3://amduat/main?endpoint=127.0.0.1:9000&insecure=1' --all
  amduat copy --from http://127.0.0.1:8080 --to /tmp/mine --closure RESULT_REF`,
		RunE: func(c *cobra.Command, args []string) (err error) {
			switch {
			case from == "" || to == "":
				return usagef("--from STORE and --to STORE are required")
			case from == to:
				return usagef("--from and --to name the same store %s", from)
			case all && (len(args) > 0 || within):
				return usagef("--all copies everything: give no REF and no --closure")
			case !all && len(args) == 0:
				return usagef("give REF... or --all")
			}
			saved := a.storeDir
			defer func() { a.storeDir = saved }()
			a.storeDir = from
			refs, err := a.parseRefs(args)
			if err != nil {
				return err
			}
			src, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(src, from, &err)
			a.storeDir = to
			dst, err := a.openStore()
			if err != nil {
				return err
			}
			defer closeStore(dst, to, &err)
			a.storeDir = saved

			ctx := c.Context()
			cp := &copier{src: src, dst: dst, index: !isRemote(to), res: copyResult{From: from, To: to, Absent: []asl.Reference{}}, pr: a.newProgress()}
			switch {
			case all:
				err = src.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error { return cp.add(ctx, in) })
				if err != nil && !isCLIError(err) {
					err = failAuto(from, err)
				}
			case within:
				err = closure.Walk(ctx, src, dedupe(refs), func(n closure.Node) error {
					if !n.Present {
						cp.res.Absent = append(cp.res.Absent, n.Ref)
						if !a.jsonOut {
							a.warnf(n.Ref.String(), errors.New("reached but not stored in --from: not copied"))
						}
						return nil
					}
					return cp.add(ctx, n.Info)
				})
				if err != nil && !isCLIError(err) {
					err = failAuto(from, err)
				}
			default:
				for _, ref := range dedupe(refs) {
					in, serr := src.Stat(ctx, ref)
					if serr != nil {
						err = refErr(ref.String(), serr)
						break
					}
					in.Ref = ref
					if err = cp.add(ctx, in); err != nil {
						break
					}
				}
			}
			if err == nil {
				err = cp.flush(ctx)
			}
			cp.pr.done()
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(cp.res)
			}
			a.printf("copied %d artifacts (%d bytes) from %s to %s; %d were there already\n", cp.res.Artifacts, cp.res.Bytes, from, to, cp.res.Present)
			return nil
		},
	}
	c.Flags().StringVar(&from, "from", "", "the store to copy from (directory, http://…, s3://…)")
	c.Flags().StringVar(&to, "to", "", "the store to copy to (must exist)")
	c.Flags().BoolVar(&all, "all", false, "copy every stored artifact")
	c.Flags().BoolVar(&within, "closure", false, "also copy everything the REFs reach")
	return c
}

// isCLIError reports whether err already carries an exit code.
func isCLIError(err error) bool {
	var ce *cliError
	return errors.As(err, &ce)
}

// copier copies artifacts, small ones in batches.
type copier struct {
	src, dst backend
	index    bool // write derived index entries to dst
	res      copyResult
	pr       *progress
	pending  []asl.Info
	bytes    uint64
}

func (cp *copier) add(ctx context.Context, in asl.Info) error {
	if in.Size > copySmallMax {
		copied, err := cp.copyLarge(ctx, in)
		if err != nil {
			return err
		}
		if copied {
			cp.count(in.Size)
		} else {
			cp.res.Present++
		}
		return nil
	}
	cp.pending = append(cp.pending, in)
	cp.bytes += in.Size
	if len(cp.pending) >= copyBatchCount || cp.bytes >= copyBatchBytes {
		return cp.flush(ctx)
	}
	return nil
}

func (cp *copier) count(size uint64) {
	cp.res.Artifacts++
	cp.res.Bytes += size
	cp.pr.show("copied %d artifacts (%d bytes)", cp.res.Artifacts, cp.res.Bytes)
}

func (cp *copier) copyLarge(ctx context.Context, in asl.Info) (bool, error) {
	if ok, err := asl.Has(ctx, cp.dst, in.Ref); err != nil {
		return false, failAuto(cp.res.To, err)
	} else if ok {
		return false, nil
	}
	rc, hdr, err := cp.src.Fetch(ctx, in.Ref)
	if err != nil {
		return false, refErr(in.Ref.String(), err)
	}
	defer rc.Close()
	got, err := cp.dst.Put(ctx, in.Ref.HashID(), hdr, rc)
	if err != nil {
		// A read failure of the source surfaces here too: its class
		// (ErrIntegrity, …) decides the exit code.
		return false, failAuto(in.Ref.String(), err)
	}
	if got != in.Ref {
		return false, fail(exitIntegrity, in.Ref.String(), fmt.Errorf("%s acknowledged it as %s: %w", cp.res.To, got, asl.ErrIntegrity))
	}
	return true, nil
}

// missing returns the refs --to does not hold, in order: one request for
// the batch when the destination answers that (a server's
// /v1/artifacts/missing), else a Has of each, copyHasParallel at once.
func (cp *copier) missing(ctx context.Context, refs []asl.Reference) ([]asl.Reference, error) {
	if m, ok := cp.dst.(interface {
		Missing(context.Context, []asl.Reference) ([]asl.Reference, error)
	}); ok {
		return m.Missing(ctx, refs)
	}
	has := make([]bool, len(refs))
	errs := make([]error, len(refs))
	sem := make(chan struct{}, copyHasParallel)
	var wg sync.WaitGroup
	for i, ref := range refs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			has[i], errs[i] = asl.Has(ctx, cp.dst, ref)
		}()
	}
	wg.Wait()
	var out []asl.Reference
	for i, ref := range refs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if !has[i] {
			out = append(out, ref)
		}
	}
	return out, nil
}

func (cp *copier) flush(ctx context.Context) error {
	if len(cp.pending) == 0 {
		return nil
	}
	all := make([]asl.Reference, len(cp.pending))
	for i, in := range cp.pending {
		all[i] = in.Ref
	}
	refs, err := cp.missing(ctx, all)
	if err != nil {
		return failAuto(cp.res.To, err)
	}
	cp.res.Present += uint64(len(all) - len(refs))
	if len(refs) == 0 {
		cp.pending, cp.bytes = cp.pending[:0], 0
		return nil
	}
	byHash := map[asl.HashID][]asl.Artifact{}
	wantRefs := map[asl.HashID][]asl.Reference{}
	var order []asl.HashID
	err = asl.GetBatch(ctx, cp.src, refs, copySmallMax, func(i int, a asl.Artifact, err error) error {
		if err != nil {
			return refErr(refs[i].String(), err)
		}
		id := refs[i].HashID()
		if _, ok := byHash[id]; !ok {
			order = append(order, id)
		}
		byHash[id] = append(byHash[id], a)
		wantRefs[id] = append(wantRefs[id], refs[i])
		return nil
	})
	if err != nil {
		if isCLIError(err) {
			return err
		}
		return failAuto(cp.res.From, err)
	}
	for _, id := range order {
		arts := byHash[id]
		var got []asl.Reference
		var entries []asl.IndexEntry
		if cp.index {
			for i, a := range arts {
				entries = append(entries, closure.IndexEntries(wantRefs[id][i], a)...)
			}
		}
		if len(entries) > 0 {
			got, err = cp.dst.PutIndexed(ctx, id, arts, entries)
		} else {
			got, err = cp.dst.PutBatch(ctx, id, arts)
		}
		if err != nil {
			return failAuto(cp.res.To, err)
		}
		for i, ref := range got {
			if ref != wantRefs[id][i] {
				return fail(exitIntegrity, wantRefs[id][i].String(), fmt.Errorf("%s acknowledged it as %s: %w", cp.res.To, ref, asl.ErrIntegrity))
			}
			cp.count(uint64(len(arts[i].Bytes)))
		}
	}
	cp.pending, cp.bytes = cp.pending[:0], 0
	return nil
}
