package surf_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// Every acknowledged run is in the log after a crash that loses whatever
// was not synced, and no record names a result that is not stored.
func TestRunLogSurvivesCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := pebblestore.Create("store", &pebblestore.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	progArt, _ := pel.SeedArtifact("concat")
	prog, _ := asl.PutArtifact(ctx, s, asl.HashSHA256, progArt)
	clock := fakeClock(time.Unix(1800000000, 0), time.Second)
	var acked []asl.Reference
	for i := 0; i < 20; i++ {
		in, _ := asl.PutArtifact(ctx, s, asl.HashSHA256, asl.Untagged([]byte{byte(i)}))
		run, err := surf.New(s, surf.Options{Clock: clock}).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in, in}})
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, run.ResultRef)
	}
	for _, pct := range []int{0, 50, 100} {
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), 3))})
		r, err := pebblestore.Open("store", &pebblestore.Options{FS: clone})
		if err != nil {
			t.Fatalf("reopen after crash (%d%%): %v", pct, err)
		}
		seen := map[asl.Reference]bool{}
		_, err = surf.ReadLog(ctx, r, surf.LogFilter{}, func(rec surf.LogRecord) error {
			if ok, err := asl.Has(ctx, r, rec.ResultRef); err != nil || !ok {
				t.Fatalf("record %d names %s, which is not stored", rec.Seq, rec.ResultRef)
			}
			seen[rec.ResultRef] = true
			return nil
		}, func(seq uint64, _ []byte, err error) { t.Fatalf("record %d: %v", seq, err) })
		if err != nil {
			t.Fatal(err)
		}
		for i, ref := range acked {
			if !seen[ref] {
				t.Fatalf("crash (%d%% unsynced kept): acknowledged run %d missing from the log", pct, i)
			}
		}
		r.Close()
	}
	s.Close()
}
