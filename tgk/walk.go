package tgk

import (
	"context"

	"github.com/amduat/amduat/asl"
)

// Graph is the provenance of an artifact: every artifact reached, the edges
// that produced each one, and the edges themselves.
type Graph struct {
	// Root is the artifact asked about.
	Root asl.Reference
	// Order lists the artifacts reached, breadth first from Root; each
	// appears once.
	Order []asl.Reference
	// Depth is each reached artifact's distance from Root in edges.
	Depth map[asl.Reference]int
	// Via maps an artifact to the edges that name it in their to list
	// (for Why) or from list (for Uses), in ascending edge-reference order.
	Via map[asl.Reference][]asl.Reference
	// Edges holds every edge met.
	Edges map[asl.Reference]Edge
	// Truncated is true when MaxDepth stopped the walk.
	Truncated bool
	// Unreadable lists indexed edges that could not be read (missing,
	// damaged or undecodable), in the order met; the walk goes on without
	// them.
	Unreadable []asl.Reference
}

// Why walks backwards from ref: the edges that produced it, the artifacts
// those edges came from, and so on (SPECS.md §17.3). It is iterative and
// visits each artifact once, so shared inputs and deep chains cost one
// lookup per artifact. maxDepth <= 0 means unbounded.
func Why(ctx context.Context, s asl.Store, ref asl.Reference, maxDepth int) (*Graph, error) {
	return walk(ctx, s, ref, maxDepth, ToIndexSpace, func(e Edge) []Endpoint { return e.From })
}

// Uses walks forwards from ref: the edges that consumed it, what they
// produced, and so on.
func Uses(ctx context.Context, s asl.Store, ref asl.Reference, maxDepth int) (*Graph, error) {
	return walk(ctx, s, ref, maxDepth, FromIndexSpace, func(e Edge) []Endpoint { return e.To })
}

func walk(ctx context.Context, s asl.Store, root asl.Reference, maxDepth int, space string, next func(Edge) []Endpoint) (*Graph, error) {
	g := &Graph{Root: root, Depth: map[asl.Reference]int{root: 0},
		Via: map[asl.Reference][]asl.Reference{}, Edges: map[asl.Reference]Edge{}}
	queue := []asl.Reference{root}
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		g.Order = append(g.Order, ref)
		if maxDepth > 0 && g.Depth[ref] >= maxDepth {
			more, err := hasEdges(ctx, s, space, ref)
			if err != nil {
				return nil, err
			}
			g.Truncated = g.Truncated || more
			continue
		}
		found, bad, err := lookup(ctx, s, space, ref)
		if err != nil {
			return nil, err
		}
		g.Unreadable = append(g.Unreadable, bad...)
		for _, f := range found {
			g.Via[ref] = append(g.Via[ref], f.Ref)
			if _, seen := g.Edges[f.Ref]; seen {
				continue
			}
			g.Edges[f.Ref] = f.Edge
			for _, ep := range next(f.Edge) {
				if _, seen := g.Depth[ep.Ref]; seen {
					continue
				}
				g.Depth[ep.Ref] = g.Depth[ref] + 1
				queue = append(queue, ep.Ref)
			}
		}
	}
	return g, nil
}
