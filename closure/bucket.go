package closure

import (
	"context"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
)

// ChildrenFunc returns Children over s with the collection's rule for an
// artifact that does not decode as its tag says (it contributes nothing,
// SPECS.md §19.6), for any backend whose collection asks the caller for
// reachability.
func ChildrenFunc(s Store) func(ctx context.Context, in asl.Info) ([]asl.Reference, error) {
	return func(ctx context.Context, in asl.Info) ([]asl.Reference, error) { return gcChildren(ctx, s, in) }
}

// RunRoots returns the roots the run log gives under opts (KeepWithin,
// KeepRuns; SPECS.md §19.7), read when called.
func RunRoots(ix asl.Indexer, opts GCOptions) func(ctx context.Context) ([]asl.Reference, error) {
	return func(ctx context.Context) ([]asl.Reference, error) { return logRoots(ctx, ix, opts) }
}

// BucketGCOptions qualify CollectBucket.
type BucketGCOptions struct {
	GCOptions
	// Grace: s3store.GCOptions.Grace (zero: the default; negative: none).
	Grace time.Duration
	// PartAge: s3store.GCOptions.PartAge.
	PartAge time.Duration
	// PackLoose: s3store.GCOptions.PackLoose.
	PackLoose bool
}

// CollectBucket runs the mark-and-sweep collection of a bucket store
// (SPECS.md §6.7, "Garbage collection") with the project's reachability
// rules (SPECS.md §19.6) from the pins and the runs opts keeps. The same
// rules are set as the store's (SetChildren), so that its pins keep what
// they reach from a concurrent collection.
func CollectBucket(ctx context.Context, s *s3store.Store, opts BucketGCOptions) (s3store.GCReport, error) {
	children := ChildrenFunc(s)
	s.SetChildren(children)
	return s.GC(ctx, s3store.GCOptions{
		Grace:     opts.Grace,
		Roots:     RunRoots(s, opts.GCOptions),
		Children:  children,
		DryRun:    opts.DryRun,
		PartAge:   opts.PartAge,
		Started:   opts.Started,
		PackLoose: opts.PackLoose,
	})
}
