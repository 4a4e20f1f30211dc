package closure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
)

// GCOptions choose what a collection keeps besides what the pins reach.
type GCOptions struct {
	DryRun bool
	// KeepWithin keeps what the runs of the run log (SPECS.md §19.7)
	// recorded within this duration before now reach; KeepRuns what the
	// newest N runs reach. Zero: none.
	KeepWithin time.Duration
	KeepRuns   int
	// CompactBelow: pebblestore.GCOptions.CompactBelow.
	CompactBelow float64
	// Now is the time KeepWithin counts back from (zero: time.Now()).
	Now time.Time
	// Started: pebblestore.GCOptions.Started.
	Started func()
}

// Collect runs the store's garbage collection with the project's
// reachability rules (SPECS.md §19.6: Children) from the pins and the runs
// opts keeps, and trims the index entries whose artifacts are gone
// (TrimRules).
func Collect(ctx context.Context, s *pebblestore.Store, opts GCOptions) (pebblestore.GCReport, error) {
	roots, err := logRoots(ctx, s, opts)
	if err != nil {
		return pebblestore.GCReport{}, err
	}
	return s.GC(ctx, pebblestore.GCOptions{
		Roots:        roots,
		Children:     func(ctx context.Context, in asl.Info) ([]asl.Reference, error) { return gcChildren(ctx, s, in) },
		Trim:         TrimRules(),
		DryRun:       opts.DryRun,
		CompactBelow: opts.CompactBelow,
		Started:      opts.Started,
	})
}

func gcChildren(ctx context.Context, s Store, in asl.Info) ([]asl.Reference, error) {
	kids, err := Children(ctx, s, in)
	if errors.Is(err, ErrUndecodable) {
		return nil, nil // contributes nothing (SPECS.md §19.6)
	}
	return kids, err
}

// logRoots returns the results of the runs opts keeps.
func logRoots(ctx context.Context, ix asl.Indexer, opts GCOptions) ([]asl.Reference, error) {
	if opts.KeepWithin <= 0 && opts.KeepRuns <= 0 {
		return nil, nil
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	var all []surf.LogRecord
	_, err := surf.ReadLog(ctx, ix, surf.LogFilter{}, func(r surf.LogRecord) error {
		all = append(all, r)
		return nil
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("run log: %w", err)
	}
	var roots []asl.Reference
	for i, r := range all {
		if (opts.KeepRuns > 0 && i >= len(all)-opts.KeepRuns) ||
			(opts.KeepWithin > 0 && !r.Time.Before(now.Add(-opts.KeepWithin))) {
			roots = append(roots, r.ResultRef)
		}
	}
	return roots, nil
}

// TrimRules are the index spaces whose entries name artifacts (SPECS.md
// §6.5), with the references that must all be stored for an entry to
// stay: surf.trace its result and trace, surf.action its result (and,
// format 2, its trace and outputs), surf.node every output, tgk.from and
// tgk.to their edge, surf.log its result. Pins (store.pin) name roots,
// which gc keeps; surf.config names none.
func TrimRules() []pebblestore.TrimRule {
	one := func(b []byte) []asl.Reference {
		r, err := asl.DecodeReference(b)
		if err != nil {
			return nil
		}
		return []asl.Reference{r}
	}
	edge := func(key, _ []byte) []asl.Reference {
		r := enc.NewReader(key)
		if _, err := asl.ReadEncodedRef(r, "endpoint"); err != nil {
			return nil
		}
		return one(key[len(key)-r.Remaining():])
	}
	return []pebblestore.TrimRule{
		{Space: surf.TraceIndexSpace, Refs: func(k, v []byte) []asl.Reference { return append(one(k), one(v)...) }},
		{Space: surf.ActionIndexSpace, Refs: func(_, v []byte) []asl.Reference {
			e, err := surf.DecodeActionEntry(v)
			if err != nil {
				return nil
			}
			return e.Refs()
		}},
		{Space: surf.NodeIndexSpace, Refs: func(_, v []byte) []asl.Reference {
			refs, err := surf.NodeOutputs(v)
			if err != nil {
				return nil
			}
			return refs
		}},
		{Space: tgk.FromIndexSpace, Refs: edge},
		{Space: tgk.ToIndexSpace, Refs: edge},
		{Space: surf.LogIndexSpace, Refs: func(k, v []byte) []asl.Reference {
			rec, err := surf.DecodeLogRecord(k, v)
			if err != nil {
				return nil
			}
			return []asl.Reference{rec.ResultRef}
		}},
	}
}
