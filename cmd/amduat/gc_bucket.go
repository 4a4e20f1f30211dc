package main

import (
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/closure"
)

// gcBucket is gc on a bucket: the mark-and-sweep collection that runs
// beside other servers (closure.CollectBucket, SPECS.md §6.7), then the
// sweep of leftover parts.
func (a *app) gcBucket(c *cobra.Command, dry bool, grace, olderThan time.Duration, keepWithin time.Duration, keepRuns int, packLoose bool) (err error) {
	if olderThan < 0 || grace < 0 {
		return usagef("--grace and --older-than must not be negative")
	}
	touch, err := touchAge()
	if err != nil {
		return err
	}
	switch {
	case touch == 0:
		touch = s3store.DefaultTouchAge
	case touch < 0:
		touch = 0
	}
	if grace < touch {
		return usagef("--grace %s is shorter than the writers' touch age %s (AMDUAT_S3_TOUCH_AGE; SPECS.md §6.7)", grace, touch)
	}
	if grace == 0 {
		grace = -1 // none: s3store's zero is its default
	}
	partAge := olderThan
	if partAge == 0 {
		partAge = -1
	}
	s, err := a.openS3(false, 0)
	if err != nil {
		return err
	}
	defer closeStore(s, a.storeDir, &err)
	rep, err := closure.CollectBucket(asl.WithActor(c.Context(), "local"), s, closure.BucketGCOptions{
		GCOptions: closure.GCOptions{DryRun: dry, KeepWithin: keepWithin, KeepRuns: keepRuns},
		Grace:     grace,
		PartAge:   partAge,
		PackLoose: packLoose,
	})
	if errors.Is(err, s3store.ErrGCRunning) {
		return fail(exitIO, a.storeDir, err)
	}
	if err != nil {
		return failAuto(a.storeDir, err)
	}
	for _, d := range rep.Sweep.Damaged {
		a.warnf("", errors.New(d))
	}
	if a.jsonOut {
		if err := a.printJSON(rep); err != nil {
			return err
		}
	} else {
		verb, sverb := "deleted", "swept"
		if dry {
			verb, sverb = "would delete", "would sweep"
		}
		if grace < 0 {
			grace = 0
		}
		a.printf("%s %d of %d artifacts (%d bytes); reached %d from %d roots (%d pins); kept %d younger than %s and %d in %d shards writers held\n",
			verb, rep.Deleted, rep.Listed, rep.DeletedBytes, rep.Reachable, rep.Roots, rep.Pins, rep.Young, grace, rep.Kept, rep.KeptShards)
		a.printf("%s %d parts (%d bytes) and %d staging leftovers; kept %d named parts, %d younger than %s\n",
			sverb, rep.Sweep.Removed, rep.Sweep.RemovedBytes, rep.Sweep.Staging, rep.Sweep.Referenced, rep.Sweep.Young, olderThan)
		pverb := "removed"
		if dry {
			pverb = "would remove"
		}
		a.printf("packs: %d %s, %d bytes carried into new packs, %d kept (shards writers held)\n",
			rep.PacksRemoved, pverb, rep.PackBytesCarried, rep.KeptPacks)
		if packLoose {
			mverb := "moved"
			if dry {
				mverb = "would move"
			}
			a.printf("%s %d loose artifacts and %d index entries into packs\n", mverb, rep.LooseMoved, rep.EntriesMoved)
		}
	}
	if len(rep.Sweep.Damaged) > 0 {
		return exitStatus(exitIntegrity)
	}
	return nil
}

// touchAge is AMDUAT_S3_TOUCH_AGE (SPECS.md §6.7): how old a stored
// artifact's object must be for a put of it to rewrite it; "0s" rewrites
// every time. Unset: s3store.DefaultTouchAge. Every writer of a bucket
// must use the same value, and gc refuses a --grace below it.
func touchAge() (time.Duration, error) {
	d, set, err := durationEnv("AMDUAT_S3_TOUCH_AGE")
	switch {
	case err != nil || !set:
		return 0, err
	case d == 0:
		return -1, nil
	}
	return d, nil
}

// durationEnv is the duration the environment variable name holds; set is
// false when it is unset. A value that is no duration of at least 0s is a
// usage error.
func durationEnv(name string) (d time.Duration, set bool, err error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, false, nil
	}
	d, err = time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false, usagef("%s=%q is not a duration of at least 0s", name, v)
	}
	return d, true, nil
}
