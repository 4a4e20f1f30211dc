package surf_test

import (
	"context"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// TestSpecWorkedExample pins the references printed in SPECS.md §14.5.
func TestSpecWorkedExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	run, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: seed(t, s, pel.SeedConst)})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]asl.Reference{"result": run.ResultRef, "trace": run.TraceRef, "edge": run.EdgeRef} {
		want := map[string]string{
			"result": "0001015081418d6bf96d871d460438bf430340a34057a4eea46bcfe87f0112c96dc3",
			"trace":  "00016dcd35db28636b7dd25b615945cb2a2f38119f408c88a6da06ce10eea08cb67c",
			"edge":   "00018984bf6c5c522d831232daf4c8bbc35d98005080c6f491112270955c1b4df521",
		}[name]
		if got.String() != want {
			t.Errorf("%s_ref = %s, SPECS.md §14.5 says %s", name, got, want)
		}
	}
	missing, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: asl.MustDerive(asl.HashSHA256, asl.Untagged(nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := missing.ResultRef.String(); got != "0001c4cc0fdd5ca4a66bef35032817694b217f4c286aa6054570708adb60812c5383" {
		t.Errorf("missing-program result_ref = %s", got)
	}
}
