package tgk_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/tgk"
)

func ref(s string) asl.Reference { return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(s))) }

func TestEdgeRoundTripAndRejects(t *testing.T) {
	e := tgk.Edge{Type: tgk.EdgeTypePELRun,
		From: []tgk.Endpoint{{tgk.RoleProgram, ref("p")}, {tgk.RoleInput, ref("i")}},
		To:   []tgk.Endpoint{{tgk.RoleOutput, ref("o")}, {tgk.RoleResult, ref("r")}, {tgk.RoleTrace, ref("t")}}}
	b, err := tgk.Append(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tgk.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := tgk.Append(nil, back)
	if !bytes.Equal(again, b) {
		t.Fatal("round trip changed the bytes")
	}
	rejects := []struct {
		name  string
		in    []byte
		field string
	}{
		{"empty", nil, "edge_type"},
		{"empty from", []byte{0, 0, 0, 1, 0, 0, 0, 0}, "from.count"},
		{"count past end", []byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 1}, "from.count"},
		{"undefined role", append([]byte{0, 0, 0, 1, 0, 0, 0, 1, 9}, b[9:]...), "from.role"},
		{"trailing", append(bytes.Clone(b), 0), "end of input"},
		{"truncated", b[:len(b)-1], "to.ref.ref_len"},
	}
	for _, tt := range rejects {
		_, err := tgk.Decode(tt.in)
		var de *enc.DecodeError
		if !errors.As(err, &de) || de.Field != tt.field {
			t.Errorf("%s: err = %v, want field %s", tt.name, err, tt.field)
		}
	}
	if _, err := tgk.DecodeArtifact(asl.Untagged(b)); !errors.Is(err, enc.ErrMalformed) {
		t.Errorf("untagged edge accepted: %v", err)
	}
}

// chain stores n run edges: x0 -> x1 -> ... -> xn, each run using program p.
func chain(t testing.TB, s *memstore.Store, n int) []asl.Reference {
	ctx := context.Background()
	xs := []asl.Reference{ref("x0")}
	p := ref("program")
	for i := 1; i <= n; i++ {
		out := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte{byte(i), byte(i >> 8), byte(i >> 16)}))
		e := tgk.Edge{Type: tgk.EdgeTypePELRun,
			From: []tgk.Endpoint{{tgk.RoleProgram, p}, {tgk.RoleInput, xs[i-1]}},
			To:   []tgk.Endpoint{{tgk.RoleOutput, out}}}
		a, err := e.Artifact()
		if err != nil {
			t.Fatal(err)
		}
		er := asl.MustDerive(asl.HashSHA256, a)
		if _, err := s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{a}, tgk.IndexEntries(e, er)); err != nil {
			t.Fatal(err)
		}
		xs = append(xs, out)
	}
	return xs
}

func TestWhyAndUses(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	xs := chain(t, s, 50)
	g, err := tgk.Why(ctx, s, xs[50], 0)
	if err != nil {
		t.Fatal(err)
	}
	// 50 outputs back to x0, plus the shared program once.
	if len(g.Edges) != 50 || len(g.Order) != 52 || g.Depth[xs[0]] != 50 || g.Truncated {
		t.Fatalf("why: %d edges, %d artifacts, depth(x0)=%d truncated=%v", len(g.Edges), len(g.Order), g.Depth[xs[0]], g.Truncated)
	}
	g, err = tgk.Why(ctx, s, xs[50], 5)
	if err != nil || !g.Truncated || len(g.Edges) != 5 {
		t.Fatalf("bounded why: %d edges truncated=%v err=%v", len(g.Edges), g.Truncated, err)
	}
	u, err := tgk.Uses(ctx, s, xs[0], 0)
	if err != nil || len(u.Edges) != 50 || u.Depth[xs[50]] != 50 {
		t.Fatalf("uses: %d edges, depth %d, err %v", len(u.Edges), u.Depth[xs[50]], err)
	}
	// The index is derived data: a fresh index rebuilt from content answers the same.
	fresh := memstore.New()
	s.Enumerate(ctx, asl.Reference{}, func(i asl.Info) error {
		a, _ := asl.Get(ctx, s, i.Ref, 0)
		_, err := asl.PutArtifact(ctx, fresh, asl.HashSHA256, a)
		return err
	})
	if n, skipped, err := tgk.Rebuild(ctx, fresh); err != nil || n != 50 || skipped != 0 {
		t.Fatalf("Rebuild = %d indexed, %d skipped, %v", n, skipped, err)
	}
	g2, err := tgk.Why(ctx, fresh, xs[50], 0)
	if err != nil || len(g2.Order) != 52 || len(g2.Edges) != 50 {
		t.Fatalf("why after rebuild: %d edges, %v", len(g2.Edges), err)
	}
}

func FuzzDecodeEdge(f *testing.F) {
	e := tgk.Edge{Type: 1, From: []tgk.Endpoint{{tgk.RoleProgram, ref("p")}}, To: []tgk.Endpoint{{tgk.RoleOutput, ref("o")}}}
	b, _ := tgk.Append(nil, e)
	f.Add(b)
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 2, 0x77, 0x77, 0, 0, 0, 1, 4, 0, 0, 0, 2, 0x77, 0x77})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := tgk.Decode(b)
		if err != nil {
			return
		}
		again, err := tgk.Append(nil, e)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted bytes do not re-encode identically: %v", err)
		}
	})
}

func BenchmarkWhy1000Deep(b *testing.B) {
	s := memstore.New()
	xs := chain(b, s, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tgk.Why(context.Background(), s, xs[1000], 0); err != nil {
			b.Fatal(err)
		}
	}
}

func TestUnreadableEdgesAreSkipped(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	xs := chain(t, s, 3)
	// Damage the edge that produced xs[2]: why(xs[3]) still answers, names
	// the damaged edge, and reindexing skips it.
	found, _, err := tgk.EdgesTo(ctx, s, xs[2])
	if err != nil || len(found) != 1 {
		t.Fatalf("EdgesTo = %v, %v", found, err)
	}
	s.Corrupt(found[0].Ref, []byte("damaged"))
	g, err := tgk.Why(ctx, s, xs[3], 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Edges) != 1 || len(g.Unreadable) != 1 || g.Unreadable[0] != found[0].Ref {
		t.Fatalf("why: %d edges, unreadable %v", len(g.Edges), g.Unreadable)
	}
	if n, skipped, err := tgk.Rebuild(ctx, s); err != nil || n != 2 || skipped != 1 {
		t.Fatalf("Rebuild = %d indexed, %d skipped, %v", n, skipped, err)
	}
	// A depth bound only probes the index: the damaged edge beyond it does
	// not matter.
	if g, err := tgk.Why(ctx, s, xs[3], 1); err != nil || !g.Truncated || len(g.Unreadable) != 0 {
		t.Fatalf("bounded why: truncated %v, unreadable %v, %v", g.Truncated, g.Unreadable, err)
	}
}
