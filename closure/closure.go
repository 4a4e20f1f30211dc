// Package closure computes which artifacts a set of roots reaches: the
// references each of the project's type tags contributes (SPECS.md §19.6),
// followed breadth first. `amduat export --closure` bundles what it
// returns, and the store's garbage collection is to keep exactly the same
// set, so both share this one definition of reachability.
package closure

import (
	"context"
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
	"github.com/amduat/amduat/trace"
)

// Store is what the walk needs: stat and fetch, and optionally the index
// (asl.Indexer) through which a result reaches its trace and edges.
type Store interface {
	asl.Fetcher
	asl.Statter
}

// Node is one reference the walk reached.
type Node struct {
	Ref     asl.Reference
	Depth   int  // edges from the nearest root (roots: 0)
	Present bool // stored; a reference that is not stored contributes nothing
	Info    asl.Info
	// Undecodable is set when the artifact carries a PEL or TGK type tag
	// but its bytes do not decode as that tag says; it contributes nothing.
	Undecodable error
}

// MaxDecode bounds the size of an artifact read to find its references.
const MaxDecode = 256 << 20

// Children returns the references the artifact in contributes, in the
// order of SPECS.md §19.6, reading its bytes only for the tags that hold
// references: a result (0x103) gives its program, inputs, params, outputs
// and scheme, then its trace (index surf.trace) and the provenance edges
// that name it (index tgk.to); a trace (0x102) its result, program,
// inputs, params, scheme and every node's outputs; an edge (0x201) every
// endpoint; a tree (0x80000001, TREE/1) every entry's reference: files,
// symlink targets and sub-trees; the plan layer's artifacts (§22) what
// their Refs methods list: a plan (PLAN/1) its programs, params and
// inputs bound to artifacts, an effect request its inputs, a receipt its
// request, outputs, plan and execution, then the provenance edges that
// name it (index tgk.to), a submission its plan and inputs,
// a ledger event its parent, execution, receipt and outputs. Programs (0x101: params are inline bytes), the scheme
// descriptor (0x100), untagged artifacts and other tags contribute nothing.
// A decode failure is returned wrapped in ErrUndecodable.
func Children(ctx context.Context, s Store, in asl.Info) ([]asl.Reference, error) {
	if !in.HasTag {
		return nil, nil
	}
	switch in.Tag {
	case asl.TagPEL1Result1, asl.TagPELTraceDAG1, asl.TagTGK1EdgeV1, tree.Tag,
		plan.TagPlan, plan.TagEffectRequest, plan.TagReceipt, plan.TagSubmission, plan.TagEvent:
	default:
		return nil, nil
	}
	a, err := asl.Get(ctx, s, in.Ref, MaxDecode)
	if err != nil {
		return nil, err
	}
	var out []asl.Reference
	switch in.Tag {
	case asl.TagPEL1Result1:
		r, err := surf.DecodeResultArtifact(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", in.Ref, ErrUndecodable, err)
		}
		out = append(out, r.ProgramRef)
		out = append(out, r.InputRefs...)
		if r.HasParams {
			out = append(out, r.ParamsRef)
		}
		out = append(out, r.OutputRefs...)
		out = append(out, r.Value.SchemeRef)
		if ix, ok := s.(asl.Indexer); ok {
			v, found, err := ix.LookupIndex(ctx, surf.TraceIndexSpace, in.Ref.Bytes())
			if err != nil {
				return nil, fmt.Errorf("%s: trace index: %w", in.Ref, err)
			}
			if found {
				if tr, err := asl.DecodeReference(v); err == nil {
					out = append(out, tr)
				}
			}
			if out, err = appendEdgesTo(ctx, ix, in.Ref, out); err != nil {
				return nil, err
			}
		}
	case asl.TagPELTraceDAG1:
		t, err := trace.DecodeArtifact(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", in.Ref, ErrUndecodable, err)
		}
		out = append(out, t.ExecResultRef, t.ProgramRef)
		out = append(out, t.InputRefs...)
		if t.HasParams {
			out = append(out, t.ParamsRef)
		}
		out = append(out, t.SchemeRef)
		for _, n := range t.Nodes {
			out = append(out, n.OutputRefs...)
		}
	case asl.TagTGK1EdgeV1:
		e, err := tgk.DecodeArtifact(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", in.Ref, ErrUndecodable, err)
		}
		for _, ep := range e.From {
			out = append(out, ep.Ref)
		}
		for _, ep := range e.To {
			out = append(out, ep.Ref)
		}
	case tree.Tag:
		es, err := tree.DecodeArtifact(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", in.Ref, ErrUndecodable, err)
		}
		out = tree.Refs(es)
	case plan.TagPlan, plan.TagEffectRequest, plan.TagReceipt, plan.TagSubmission, plan.TagEvent:
		refs, err := planRefs(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", in.Ref, ErrUndecodable, err)
		}
		out = refs
		if ix, ok := s.(asl.Indexer); ok && in.Tag == plan.TagReceipt {
			if out, err = appendEdgesTo(ctx, ix, in.Ref, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// appendEdgesTo appends the provenance edges that name ref in their to
// list (index tgk.to, SPECS.md §17.2): a result's PEL_RUN edge, a
// receipt's PLAN_EFFECT edge.
func appendEdgesTo(ctx context.Context, ix asl.Indexer, ref asl.Reference, out []asl.Reference) ([]asl.Reference, error) {
	prefix := asl.AppendEncodedRef(nil, ref)
	err := ix.ScanIndex(ctx, tgk.ToIndexSpace, prefix, func(key, _ []byte) error {
		if e, err := asl.DecodeReference(key[len(prefix):]); err == nil {
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: provenance index: %w", ref, err)
	}
	return out, nil
}

// planRefs decodes an artifact of the plan layer (SPECS.md §22) and
// returns the references it contributes.
func planRefs(a asl.Artifact) ([]asl.Reference, error) {
	switch a.Tag {
	case plan.TagPlan:
		p, err := plan.DecodePlanArtifact(a)
		return p.Refs(), err
	case plan.TagEffectRequest:
		r, err := plan.DecodeEffectRequestArtifact(a)
		return r.Refs(), err
	case plan.TagReceipt:
		r, err := plan.DecodeReceiptArtifact(a)
		return r.Refs(), err
	case plan.TagSubmission:
		s, err := plan.DecodeSubmissionArtifact(a)
		return s.Refs(), err
	default:
		e, err := plan.DecodeEventArtifact(a)
		return e.Refs(), err
	}
}

// ErrUndecodable marks an artifact whose type tag promises references but
// whose bytes do not decode.
var ErrUndecodable = errors.New("does not decode as its type tag says")

// Walk visits every reference reachable from roots, breadth first, each
// once, roots in order and children in Children's order, calling fn for
// each (including references that are not stored, with Present false).
// Damage (ErrIntegrity) or an I/O failure while reading an artifact stops
// the walk with that error; an undecodable artifact is reported in its
// Node and contributes nothing. Memory: one entry per reached reference.
func Walk(ctx context.Context, s Store, roots []asl.Reference, fn func(Node) error) error {
	seen := make(map[asl.Reference]struct{}, len(roots))
	type item struct {
		ref   asl.Reference
		depth int
	}
	var queue []item
	for _, r := range roots {
		if _, dup := seen[r]; !dup {
			seen[r] = struct{}{}
			queue = append(queue, item{r, 0})
		}
	}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		it := queue[0]
		queue = queue[1:]
		n := Node{Ref: it.ref, Depth: it.depth}
		in, err := s.Stat(ctx, it.ref)
		switch {
		case err == nil:
			n.Present, n.Info = true, in
			n.Info.Ref = it.ref
		case errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity):
		case errors.Is(err, asl.ErrUnsupported):
		default:
			return fmt.Errorf("closure: %s: %w", it.ref, err)
		}
		var kids []asl.Reference
		if n.Present {
			kids, err = Children(ctx, s, n.Info)
			if errors.Is(err, ErrUndecodable) {
				n.Undecodable, kids, err = err, nil, nil
			}
			if err != nil {
				return fmt.Errorf("closure: %w", err)
			}
		}
		if err := fn(n); err != nil {
			return err
		}
		for _, k := range kids {
			if k.IsZero() {
				continue
			}
			if _, dup := seen[k]; !dup {
				seen[k] = struct{}{}
				queue = append(queue, item{k, it.depth + 1})
			}
		}
	}
	return nil
}

// IndexEntries returns the derived index entries (SPECS.md §6.5) that the
// artifact a stored under ref implies: for a trace, the surf.trace entry
// from its result; for a TGK/1 edge, its tgk.from and tgk.to entries.
// Import uses it so that imported runs are found as if they ran here.
// Anything else, or an artifact that does not decode, gives none.
func IndexEntries(ref asl.Reference, a asl.Artifact) []asl.IndexEntry {
	if !a.HasTag {
		return nil
	}
	switch a.Tag {
	case asl.TagPELTraceDAG1:
		t, err := trace.DecodeArtifact(a)
		if err != nil {
			return nil
		}
		return []asl.IndexEntry{{Space: surf.TraceIndexSpace, Key: t.ExecResultRef.Bytes(), Value: ref.Bytes()}}
	case asl.TagTGK1EdgeV1:
		e, err := tgk.DecodeArtifact(a)
		if err != nil {
			return nil
		}
		return tgk.IndexEntries(e, ref)
	}
	return nil
}

// Root is a named root of the store (a pin, SPECS.md §19.8).
type Root struct {
	Name string
	Ref  asl.Reference
}

// Protected tells, for each of refs, why deleting it would break a root:
// "pinned as NAME" when a root names it, "reachable from pin NAME" when a
// root's closure (SPECS.md §19.6) reaches it. Refs absent from the result
// are neither. The walk stops early once every ref has a reason.
func Protected(ctx context.Context, s Store, roots []Root, refs []asl.Reference) (map[asl.Reference]string, error) {
	want := make(map[asl.Reference]bool, len(refs))
	for _, r := range refs {
		want[r] = true
	}
	why := map[asl.Reference]string{}
	for _, root := range roots {
		if want[root.Ref] {
			if _, ok := why[root.Ref]; !ok {
				why[root.Ref] = "pinned as " + root.Name
			}
		}
	}
	errDone := errors.New("done")
	for _, root := range roots {
		if len(why) == len(want) {
			break
		}
		err := Walk(ctx, s, []asl.Reference{root.Ref}, func(n Node) error {
			if want[n.Ref] {
				if _, ok := why[n.Ref]; !ok {
					why[n.Ref] = "reachable from pin " + root.Name
				}
			}
			if len(why) == len(want) {
				return errDone
			}
			return nil
		})
		if err != nil && !errors.Is(err, errDone) {
			return nil, fmt.Errorf("pin %s: %w", root.Name, err)
		}
	}
	return why, nil
}
