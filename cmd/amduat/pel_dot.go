package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

// Graphviz DOT rendering of a program DAG (pel show --dot). The output is a
// pure function of the program, the optional trace and the title: nodes in
// ascending id order, then missing nodes that inputs or roots name, edges in
// node then input order, roots in root order; no map iteration order.

// Fill colours of program nodes.
const (
	dotColorPlain    = "white"
	dotColorOK       = "palegreen"
	dotColorFailed   = "lightcoral"
	dotColorSkipped  = "lightgrey"
	dotColorExternal = "lightblue"
)

// dotQuote returns s as a DOT double-quoted string. Backslashes and quotes
// are escaped; newlines become the DOT line break \n; other control
// characters are written as Go escapes, so labels stay on one source line.
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, line := range strings.SplitAfter(s, "\n") {
		nl := strings.HasSuffix(line, "\n")
		line = strings.TrimSuffix(line, "\n")
		t := printableText([]byte(line))
		t = strings.ReplaceAll(t, `\`, `\\`)
		t = strings.ReplaceAll(t, `"`, `\"`)
		b.WriteString(t)
		if nl {
			b.WriteString(`\n`)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func shortRef(r asl.Reference) string {
	s := r.String()
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// programDOT renders p as a DOT digraph. With a trace, every node is
// coloured by its record: OK (green), failed (red) or not evaluated (grey,
// dashed); external inputs and outputs show their references.
func programDOT(p pel.Program, title string, tr *trace.Trace) []byte {
	var b bytes.Buffer
	records := map[pel.NodeID]*trace.NodeRecord{}
	if tr != nil {
		for i := range tr.Nodes {
			records[tr.Nodes[i].NodeID] = &tr.Nodes[i]
		}
		title += fmt.Sprintf("\nstatus %s status_code 0x%08x", tr.Status, tr.StatusCode)
	}
	b.WriteString("digraph pel {\n")
	fmt.Fprintf(&b, "  graph [rankdir=LR, labelloc=t, fontname=\"Helvetica\", label=%s];\n", dotQuote(title))
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\"];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=10];\n")

	exists := make(map[pel.NodeID]bool, len(p.Nodes))
	var externals []uint32
	var missing []pel.NodeID
	for _, n := range p.Nodes {
		exists[n.ID] = true
	}
	for _, n := range p.Nodes {
		for _, in := range n.Inputs {
			if in.Kind == pel.InputExternal {
				externals = append(externals, in.InputIndex)
			} else if !exists[in.NodeID] {
				missing = append(missing, in.NodeID)
			}
		}
	}
	for _, r := range p.Roots {
		if !exists[r.NodeID] {
			missing = append(missing, r.NodeID)
		}
	}
	slices.Sort(externals)
	externals = slices.Compact(externals)
	slices.Sort(missing)
	missing = slices.Compact(missing)

	for _, i := range externals {
		label := fmt.Sprintf("input %d", i)
		attrs := fmt.Sprintf("shape=ellipse, fillcolor=%s", dotColorExternal)
		if tr != nil {
			if int64(i) < int64(len(tr.InputRefs)) {
				label += "\n" + shortRef(tr.InputRefs[i])
			} else {
				label += "\nnot given"
				attrs = fmt.Sprintf("shape=ellipse, fillcolor=%s, style=\"filled,dashed\"", dotColorFailed)
			}
		}
		fmt.Fprintf(&b, "  in%d [%s, label=%s];\n", i, attrs, dotQuote(label))
	}
	for _, n := range p.Nodes {
		label := fmt.Sprintf("node %d\n%s", n.ID, n.Op)
		color, style := dotColorPlain, ""
		if tr != nil {
			rec, reached := records[n.ID]
			switch {
			case !reached:
				color, style = dotColorSkipped, `, style="rounded,filled,dashed"`
				label += "\nnot evaluated"
			case rec.Status == pel.StatusOK:
				color = dotColorOK
				label += "\nOK"
			default:
				color = dotColorFailed
				label += fmt.Sprintf("\n%s status_code 0x%08x", rec.Status, rec.StatusCode)
			}
		}
		fmt.Fprintf(&b, "  n%d [fillcolor=%s%s, label=%s];\n", n.ID, color, style, dotQuote(label))
	}
	for _, id := range missing {
		fmt.Fprintf(&b, "  n%d [fillcolor=%s, color=red, style=\"rounded,filled,dashed\", label=%s];\n",
			id, dotColorFailed, dotQuote(fmt.Sprintf("missing node %d", id)))
	}
	for k, r := range p.Roots {
		label := fmt.Sprintf("output %d", k)
		if rec, ok := records[r.NodeID]; ok && tr.Status == pel.StatusOK && int64(r.OutputIndex) < int64(len(rec.OutputRefs)) {
			label += "\n" + shortRef(rec.OutputRefs[r.OutputIndex])
		}
		fmt.Fprintf(&b, "  out%d [shape=ellipse, fillcolor=%s, label=%s];\n", k, dotColorExternal, dotQuote(label))
	}
	for _, n := range p.Nodes {
		for j, in := range n.Inputs {
			if in.Kind == pel.InputExternal {
				fmt.Fprintf(&b, "  in%d -> n%d [label=%s];\n", in.InputIndex, n.ID, dotQuote(fmt.Sprintf("in %d", j)))
			} else {
				fmt.Fprintf(&b, "  n%d -> n%d [label=%s];\n", in.NodeID, n.ID, dotQuote(fmt.Sprintf("out %d -> in %d", in.OutputIndex, j)))
			}
		}
	}
	for k, r := range p.Roots {
		fmt.Fprintf(&b, "  n%d -> out%d [label=%s];\n", r.NodeID, k, dotQuote(fmt.Sprintf("out %d", r.OutputIndex)))
	}
	b.WriteString("}\n")
	return b.Bytes()
}
