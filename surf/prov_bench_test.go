package surf_test

import (
	"context"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
)

// BenchmarkProvWhy1000Deep measures `prov why` on the output of the last of
// 1,000 chained surface runs (each run concatenates the previous run's
// output with a constant input) in an embedded Pebble store.
func BenchmarkProvWhy1000Deep(b *testing.B) {
	ctx := context.Background()
	st, err := pebblestore.Create(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	sf := surf.New(st, surf.Options{})
	concat := seed(b, st, pel.SeedConcat)
	x := put(b, st, asl.Untagged([]byte("x")))
	cur := put(b, st, asl.Untagged([]byte("start")))
	const depth = 1000
	for i := 0; i < depth; i++ {
		run, err := sf.Run(ctx, surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{cur, x}})
		if err != nil {
			b.Fatal(err)
		}
		cur = run.OutputRefs[0]
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := tgk.Why(ctx, st, cur, 0)
		if err != nil {
			b.Fatal(err)
		}
		if len(g.Edges) != depth {
			b.Fatalf("why reached %d runs, want %d", len(g.Edges), depth)
		}
	}
}
