package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/tgk"
)

func init() { addCommand(newProvCmd) }

func newProvCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prov",
		Short: "Query provenance: how an artifact came to be, what was computed from it",
		Long: `Every program run records a TGK/1 provenance edge (SPECS.md §17): from the
program, inputs and params to the outputs, the result and the trace. The store
indexes edges by both ends, so these questions are answered without scanning.`,
	}
	var depth int
	var dot bool
	walkCmd := func(use, short string) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " REF",
			Short: short,
			Args:  rangeArgs(1, 1),
			RunE: func(c *cobra.Command, args []string) (err error) {
				ref, err := a.parseRef(args[0])
				if err != nil {
					return err
				}
				s, err := a.openStoreReadOnly()
				if err != nil {
					return err
				}
				defer closeStore(s, a.storeDir, &err)
				walk := tgk.Uses
				if use == "why" {
					walk = tgk.Why
				}
				g, err := walk(c.Context(), s, ref, depth)
				if err != nil {
					return failAuto(args[0], err)
				}
				for _, e := range g.Unreadable {
					a.warnf(e.String(), fmt.Errorf("provenance edge cannot be read (missing or damaged); skipped"))
				}
				switch {
				case dot && a.jsonOut:
					// As pel show --dot --json: the DOT text in a JSON string.
					var b strings.Builder
					writeGraphDOT(&b, g, use == "why")
					return a.printJSON(struct {
						Ref asl.Reference `json:"ref"`
						Dot string        `json:"dot"`
					}{ref, b.String()})
				case a.jsonOut:
					return a.printJSON(report.NewGraph(g))
				case dot:
					writeGraphDOT(a.stdout, g, use == "why")
				default:
					writeGraphText(a.stdout, g, use == "why")
				}
				return nil
			},
		}
		c.Flags().IntVar(&depth, "depth", 0, "stop after this many edges (0: no bound)")
		c.Flags().BoolVar(&dot, "dot", false, "print the graph as Graphviz DOT (with --json: {\"ref\",\"dot\"})")
		return c
	}
	cmd.AddCommand(
		walkCmd("why", "Show how an artifact came to be, recursively (the runs that produced it and their inputs)"),
		walkCmd("uses", "Show what was computed from an artifact, recursively"),
		&cobra.Command{
			Use:   "reindex",
			Short: "Rebuild the provenance index from the edge artifacts in the store",
			Args:  rangeArgs(0, 0),
			RunE: func(c *cobra.Command, _ []string) (err error) {
				s, err := a.openStore()
				if err != nil {
					return err
				}
				defer closeStore(s, a.storeDir, &err)
				n, skipped, err := tgk.Rebuild(c.Context(), s)
				if err != nil {
					return failAuto(a.storeDir, err)
				}
				if a.jsonOut {
					return a.printJSON(struct {
						Edges   int `json:"edges"`
						Skipped int `json:"skipped"`
					}{n, skipped})
				}
				a.printf("indexed %d edges, skipped %d unreadable\n", n, skipped)
				return nil
			},
		},
	)
	return cmd
}

func endpointsText(eps []tgk.Endpoint) string {
	parts := make([]string, len(eps))
	for i, ep := range eps {
		parts[i] = ep.Role.String() + " " + ep.Ref.String()
	}
	return strings.Join(parts, ", ")
}

// writeGraphText prints each artifact reached, breadth first, indented by
// depth, followed by the runs that produced (why) or consumed (uses) it.
func writeGraphText(w io.Writer, g *tgk.Graph, why bool) {
	arrow, other := "produced by run", "from"
	if !why {
		arrow, other = "used by run", "to"
	}
	for _, r := range g.Order {
		indent := strings.Repeat("  ", g.Depth[r])
		fmt.Fprintf(w, "%s%s\n", indent, r)
		for _, e := range g.Via[r] {
			edge := g.Edges[e]
			eps := edge.From
			if !why {
				eps = edge.To
			}
			fmt.Fprintf(w, "%s  %s %s %s: %s\n", indent, arrow, e, other, endpointsText(eps))
		}
	}
	fmt.Fprintf(w, "%d artifacts, %d runs", len(g.Order), len(g.Edges))
	if g.Truncated {
		fmt.Fprint(w, " (truncated by --depth)")
	}
	fmt.Fprintln(w)
}

// writeGraphDOT renders artifacts as ellipses and runs as boxes, with arrows
// in the direction data flowed.
func writeGraphDOT(w io.Writer, g *tgk.Graph, why bool) {
	fmt.Fprintln(w, "digraph provenance {")
	fmt.Fprintln(w, "  rankdir=LR;")
	short := func(r asl.Reference) string {
		s := r.String()
		if len(s) > 16 {
			return s[:16] + "…"
		}
		return s
	}
	seen := map[asl.Reference]bool{}
	node := func(r asl.Reference) {
		if !seen[r] {
			seen[r] = true
			fmt.Fprintf(w, "  %q [shape=ellipse,label=%q];\n", r.String(), short(r))
		}
	}
	for _, r := range g.Order {
		node(r)
	}
	for _, e := range report.SortedEdgeRefs(g) {
		edge := g.Edges[e]
		fmt.Fprintf(w, "  %q [shape=box,label=%q];\n", e.String(), "run "+short(e))
		for _, ep := range edge.From {
			node(ep.Ref)
			fmt.Fprintf(w, "  %q -> %q [label=%q];\n", ep.Ref.String(), e.String(), ep.Role.String())
		}
		for _, ep := range edge.To {
			node(ep.Ref)
			fmt.Fprintf(w, "  %q -> %q [label=%q];\n", e.String(), ep.Ref.String(), ep.Role.String())
		}
	}
	fmt.Fprintln(w, "}")
}
