package conformance

import (
	"context"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
)

// Solvers and differential cases for TREE/1 (SPECS.md §19.9, §21).

func init() {
	registerSolver(KindTreeEncode, solve1(func(_ context.Context, in treeEncodeInput) (any, error) {
		es, err := in.entries()
		if err != nil {
			return nil, err
		}
		b, err := tree.Encode(es)
		if err != nil {
			return rejectExpect{&Reject{Field: "entries"}}, nil
		}
		return treeEncodeExpect{Tree: ptr(Hex(b)), Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(tree.Tag, b)).String()}, nil
	}))
	registerSolver(KindTreeDecode, solve1(func(_ context.Context, in treeBytesInput) (any, error) {
		if err := needIn("tree", in.Tree != nil); err != nil {
			return nil, err
		}
		es, err := tree.Decode(*in.Tree)
		if err != nil {
			return rejectExpect{RejectOf(err, "")}, nil
		}
		out := treeAcceptExpect{Entries: []treeEntryVec{}}
		for _, e := range es {
			out.Entries = append(out.Entries, treeEntryToVec(e))
		}
		return out, nil
	}))
	genTable = append(genTable,
		caseGen{"tree", KindTreeEncode, func(g *CaseGenerator) (any, error) {
			in := treeEncodeInput{Entries: []treeEntryVec{}}
			for _, e := range g.treeEntries() {
				in.Entries = append(in.Entries, treeEntryToVec(e))
			}
			return in, nil
		}},
		caseGen{"tree", KindTreeDecode, func(g *CaseGenerator) (any, error) {
			b, err := tree.Encode(g.treeEntries())
			if err != nil {
				return nil, errRetry
			}
			return treeBytesInput{Tree: ptr(Hex(g.maybeMutate(b)))}, nil
		}},
	)
}

// treeEntries draws up to five entries, valid most of the time (a name
// repeated, empty or with a slash, a symlink of size 0 break a rule).
func (g *CaseGenerator) treeEntries() []tree.Entry {
	names := []string{"a", "b", "B", "a.b", "a0", "\xff", "run.sh", "", "x/y", ".", ".."}
	var es []tree.Entry
	for range g.rng.IntN(6) {
		e := tree.Entry{Name: names[g.rng.IntN(7)], Kind: tree.Kind(1 + g.rng.IntN(3)), Ref: g.ref(), Size: g.rng.Uint64N(1 << 20)}
		if g.chance(10) {
			e.Name = names[g.rng.IntN(len(names))]
		}
		switch e.Kind {
		case tree.File:
			e.Executable = g.chance(3)
		case tree.Symlink:
			e.Size = 1 + g.rng.Uint64N(64)
			if g.chance(10) {
				e.Size = 0
			}
		}
		es = append(es, e)
	}
	return es
}
