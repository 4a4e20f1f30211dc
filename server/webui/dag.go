package webui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

// The program DAG as inline SVG, laid out on the server.
//
// Columns are layers, left to right, by the longest path from a source:
// external inputs, the global params and nodes without inputs are in the
// first column, every other node one column after its furthest input, and
// the program's outputs (one box per root) in a last column of their own.
// An edge that spans several columns bends through a placeholder in each
// column it crosses, so it never runs through a box. Within a column, boxes
// start in a fixed order (inputs by index, nodes by id, outputs by root
// index) and are reordered by a few barycenter sweeps, ties kept in that
// order. Every coordinate is an integer computed from the program alone (and
// the trace's statuses for colouring), so the same program gives the same
// SVG bytes.
//
// A program that is not a DAG (a cycle) or names nodes it lacks can still be
// stored: nodes in a cycle go to a column after the others and are marked,
// and a missing node gets a box of its own.

// Layout constants, in SVG user units (CSS pixels).
const (
	dagMargin   = 16
	dagBoxW     = 184
	dagColGap   = 56
	dagRowGap   = 18
	dagNodeH    = 48
	dagNodeHRun = 64 // with a status line
	dagTermH    = 44 // inputs, params, outputs, missing nodes
	dagDummyH   = 6
	dagOpRunes  = 22 // op@version longer than this is abbreviated
	dagSubRunes = 26
	dagBaseline = 4 // from a line's middle to its baseline
	dagLineStep = 16
	dagTextX    = 10
)

type dagView struct {
	Width, Height int
	Label         string
	Edges         []dagEdge
	Boxes         []dagBox
	Ports         []dagText
	Statuses      bool // coloured by a trace: show the legend
}

type dagEdge struct {
	D     string
	Class string
}

type dagBox struct {
	X, Y, W, H int
	Class      string
	Href       string
	Title      string
	NodeID     string // data-node, for nodes
	Lines      []dagText
}

type dagText struct {
	X, Y   int
	Class  string
	Anchor string
	Text   string
}

type vkind uint8

const (
	vExt vkind = iota
	vParams
	vNode
	vMissing
	vOut
	vDummy
)

type vertex struct {
	kind  vkind
	id    uint32 // input index, node id, root index
	node  *pel.Node
	col   int
	rank  int // position in its column
	seq   int // initial order in its column: the tie-break
	cycle bool
	preds []adj // what enters it, from the left
	succs []adj // what leaves it, to the right

	y, h int
}

// adj is one neighbour of a vertex in the column next to it, and where the
// edge meets the right-hand vertex: slot in [0, slotScale).
type adj struct {
	v, slot int
}

// slotScale subdivides a rank into positions of edge ends, so the ordering
// sees which input port an edge enters.
const slotScale = 1024

// dagEdgeSpec is one drawn edge: from vertex u to vertex v entering v at
// port (of ports), through the placeholders via.
type dagEdgeSpec struct {
	u, v        int
	port, ports int
	via         []int
}

// runContext is what a result or trace adds to a drawing of its program.
type runContext struct {
	trace     *trace.Trace
	records   map[pel.NodeID]*trace.NodeRecord
	inputs    []asl.Reference
	hasInputs bool
	params    *asl.Reference
	outputs   []asl.Reference // by root index; nil when unknown
}

func newRunContext(t *trace.Trace, inputs []asl.Reference, params *asl.Reference, outputs []asl.Reference) *runContext {
	rc := &runContext{trace: t, inputs: inputs, hasInputs: true, params: params, outputs: outputs}
	if t != nil {
		rc.records = make(map[pel.NodeID]*trace.NodeRecord, len(t.Nodes))
		for i := range t.Nodes {
			rc.records[t.Nodes[i].NodeID] = &t.Nodes[i]
		}
	}
	return rc
}

// nodeState is how a run left a node: its CSS class and a short text.
func (rc *runContext) nodeState(id pel.NodeID) (class, text string, rec *trace.NodeRecord) {
	if rc == nil || rc.trace == nil {
		return "", "", nil
	}
	rec, ok := rc.records[id]
	switch {
	case !ok:
		return "st-skipped", "not evaluated", nil
	case rec.Status == pel.StatusOK:
		return "st-ok", "OK", rec
	}
	return "st-failed", fmt.Sprintf("%s %s", rec.Status, codeHex(rec.StatusCode)), rec
}

// codeHex prints a status code the one way every surface of amduat does
// (SPECS.md §16.1).
func codeHex(c uint32) string { return fmt.Sprintf("0x%08x", c) }

// layoutDAG draws p; rc (may be nil) colours it by a run. It returns nil and
// a reason when the drawing would exceed MaxDAGVertices.
func (h *handler) layoutDAG(p pel.Program, rc *runContext) (*dagView, string) {
	var vs []vertex
	add := func(v vertex) int {
		vs = append(vs, v)
		return len(vs) - 1
	}

	// Vertices: inputs, params, nodes, missing nodes, outputs.
	nodeIdx := make(map[pel.NodeID]int, len(p.Nodes))
	var extIDs []uint32
	var missing []pel.NodeID
	needsParams := false
	for i := range p.Nodes {
		n := &p.Nodes[i]
		for _, in := range n.Inputs {
			if in.Kind == pel.InputExternal {
				extIDs = append(extIDs, in.InputIndex)
			}
		}
		if op, ok := h.reg.Lookup(n.Op); ok && op.NeedsGlobalParams {
			needsParams = true
		}
	}
	slices.Sort(extIDs)
	extIDs = slices.Compact(extIDs)
	extIdx := make(map[uint32]int, len(extIDs))
	for _, i := range extIDs {
		extIdx[i] = add(vertex{kind: vExt, id: i})
	}
	paramsIdx := -1
	if needsParams {
		paramsIdx = add(vertex{kind: vParams})
	}
	for i := range p.Nodes {
		nodeIdx[p.Nodes[i].ID] = add(vertex{kind: vNode, id: uint32(p.Nodes[i].ID), node: &p.Nodes[i]})
	}
	exists := func(id pel.NodeID) bool { _, ok := nodeIdx[id]; return ok }
	for _, n := range p.Nodes {
		for _, in := range n.Inputs {
			if in.Kind == pel.InputNode && !exists(in.NodeID) {
				missing = append(missing, in.NodeID)
			}
		}
	}
	for _, r := range p.Roots {
		if !exists(r.NodeID) {
			missing = append(missing, r.NodeID)
		}
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	for _, id := range missing {
		nodeIdx[id] = add(vertex{kind: vMissing, id: uint32(id)})
	}
	outIdx := make([]int, len(p.Roots))
	for k := range p.Roots {
		outIdx[k] = add(vertex{kind: vOut, id: uint32(k)})
	}
	if len(vs) == 0 {
		return nil, "The program has no nodes."
	}
	if len(vs) > MaxDAGVertices {
		return nil, fmt.Sprintf("The program has too many nodes to draw (%d boxes, limit %d).", len(vs), MaxDAGVertices)
	}

	// Edges, in node order then input order, then roots.
	var edges []dagEdgeSpec
	for _, n := range p.Nodes {
		v := nodeIdx[n.ID]
		ports := len(n.Inputs)
		needs := false
		if op, ok := h.reg.Lookup(n.Op); ok && op.NeedsGlobalParams {
			needs = true
			ports++
		}
		for j, in := range n.Inputs {
			u := extIdx[in.InputIndex]
			if in.Kind == pel.InputNode {
				u = nodeIdx[in.NodeID]
			}
			edges = append(edges, dagEdgeSpec{u: u, v: v, port: j, ports: ports})
		}
		if needs {
			edges = append(edges, dagEdgeSpec{u: paramsIdx, v: v, port: ports - 1, ports: ports})
		}
	}
	for k, r := range p.Roots {
		edges = append(edges, dagEdgeSpec{u: nodeIdx[r.NodeID], v: outIdx[k], port: 0, ports: 1})
	}

	// Layers: the longest path from a source. Inputs and params are sources
	// in layer 0, and so is a node without inputs (or a missing one); a node
	// is one layer after its furthest input. Kahn's algorithm over the
	// node-to-node edges, so a cycle cannot loop: nodes left over are in or
	// behind a cycle.
	layer := make([]int, len(vs))
	indeg := make([]int, len(vs))
	nodeSuccs := make(map[int][]int)
	for _, e := range edges {
		switch {
		case vs[e.v].kind != vNode:
		case isNodeKind(vs[e.u].kind):
			indeg[e.v]++
			nodeSuccs[e.u] = append(nodeSuccs[e.u], e.v)
		default: // from an input or the params
			layer[e.v] = max(layer[e.v], 1)
		}
	}
	var queue []int
	for i := range vs {
		if isNodeKind(vs[i].kind) && indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	maxLayer := 0
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		maxLayer = max(maxLayer, layer[u])
		for _, v := range nodeSuccs[u] {
			layer[v] = max(layer[v], layer[u]+1)
			if indeg[v]--; indeg[v] == 0 {
				queue = append(queue, v)
			}
		}
	}
	cycles := false
	for i := range vs {
		if isNodeKind(vs[i].kind) && indeg[i] > 0 {
			vs[i].cycle = true
			cycles = true
		}
	}
	if cycles {
		maxLayer++
		for i := range vs {
			if vs[i].cycle {
				layer[i] = maxLayer
			}
		}
	}
	lastCol := maxLayer + 1 // the outputs
	if len(p.Roots) == 0 {
		lastCol = maxLayer
	}
	for i := range vs {
		vs[i].col = layer[i]
		if vs[i].kind == vOut {
			vs[i].col = lastCol
		}
	}

	// Placeholders for edges that skip columns.
	for ei := range edges {
		e := &edges[ei]
		cu, cv := vs[e.u].col, vs[e.v].col
		prev := e.u
		for c := cu + 1; c < cv; c++ {
			d := add(vertex{kind: vDummy, col: c})
			e.via = append(e.via, d)
			vs[d].preds = append(vs[d].preds, adj{prev, slotScale / 2})
			vs[prev].succs = append(vs[prev].succs, adj{d, slotScale / 2})
			prev = d
		}
		if cv > cu {
			slot := (2*e.port + 1) * slotScale / (2 * e.ports)
			vs[e.v].preds = append(vs[e.v].preds, adj{prev, slot})
			vs[prev].succs = append(vs[prev].succs, adj{e.v, slot})
		}
		if len(vs) > MaxDAGVertices {
			return nil, fmt.Sprintf("The program is too large to draw (more than %d boxes and edge bends).", MaxDAGVertices)
		}
	}

	// Columns in their initial order: vertices were added inputs, params,
	// nodes by id, missing nodes, outputs, then placeholders by edge.
	cols := make([][]int, lastCol+1)
	for i := range vs {
		c := vs[i].col
		vs[i].seq = len(cols[c])
		vs[i].rank = vs[i].seq
		cols[c] = append(cols[c], i)
	}
	// A sweep orders column c by the mean position of each vertex's
	// neighbours in the previous column (forward) or the next one
	// (backward), where an edge's position is its neighbour's rank refined
	// by the input port it enters on the right-hand side.
	sweep := func(c int, forward bool) {
		type key struct {
			sum, n int
			v      int
		}
		keys := make([]key, len(cols[c]))
		for k, v := range cols[c] {
			s, n := 0, 0
			if forward {
				for _, a := range vs[v].preds {
					s += vs[a.v].rank*slotScale + slotScale/2
					n++
				}
			} else {
				for _, a := range vs[v].succs {
					s += vs[a.v].rank*slotScale + a.slot
					n++
				}
			}
			if n == 0 {
				s, n = vs[v].rank*slotScale+slotScale/2, 1
			}
			keys[k] = key{s, n, v}
		}
		// Compare sum/n exactly by cross-multiplying; ties keep the
		// initial order.
		slices.SortStableFunc(keys, func(a, b key) int {
			if d := a.sum*b.n - b.sum*a.n; d != 0 {
				return d
			}
			return vs[a.v].seq - vs[b.v].seq
		})
		for k, kk := range keys {
			cols[c][k] = kk.v
			vs[kk.v].rank = k
		}
	}
	for pass := 0; pass < 2; pass++ {
		for c := 1; c < len(cols); c++ {
			sweep(c, true)
		}
		for c := len(cols) - 2; c >= 0; c-- {
			sweep(c, false)
		}
	}
	for c := 1; c < len(cols); c++ {
		sweep(c, true)
	}

	// Coordinates: columns stacked and centred vertically.
	nodeH := dagNodeH
	if rc != nil && rc.trace != nil {
		nodeH = dagNodeHRun
	}
	colH := make([]int, len(cols))
	tallest := 0
	for c, col := range cols {
		for k, v := range col {
			switch vs[v].kind {
			case vNode:
				vs[v].h = nodeH
			case vDummy:
				vs[v].h = dagDummyH
			default:
				vs[v].h = dagTermH
			}
			if k > 0 {
				colH[c] += dagRowGap
			}
			colH[c] += vs[v].h
		}
		tallest = max(tallest, colH[c])
	}
	for c, col := range cols {
		y := dagMargin + (tallest-colH[c])/2
		for _, v := range col {
			vs[v].y = y
			y += vs[v].h + dagRowGap
		}
	}
	colX := func(c int) int { return dagMargin + c*(dagBoxW+dagColGap) }

	dv := &dagView{
		Width:    2*dagMargin + len(cols)*dagBoxW + max(len(cols)-1, 0)*dagColGap,
		Height:   2*dagMargin + tallest,
		Statuses: rc != nil && rc.trace != nil,
		Label:    fmt.Sprintf("program DAG: %s, %s", plural(len(p.Nodes), "node"), plural(len(p.Roots), "root")),
	}

	// Edges.
	for _, e := range edges {
		u, v := &vs[e.u], &vs[e.v]
		x := colX(u.col) + dagBoxW
		y := u.y + u.h/2
		var d strings.Builder
		fmt.Fprintf(&d, "M%d,%d", x, y)
		for _, dd := range e.via {
			w := &vs[dd]
			cx, cy := colX(w.col), w.y+w.h/2
			curve(&d, x, y, cx, cy)
			x, y = cx+dagBoxW, cy
			fmt.Fprintf(&d, " L%d,%d", x, y)
		}
		tx := colX(v.col)
		ty := v.y + (e.port+1)*v.h/(e.ports+1)
		if v.col <= u.col {
			// A back edge (a cycle): loop out and in.
			fmt.Fprintf(&d, " C%d,%d %d,%d %d,%d", x+60, y-60, tx-60, ty-60, tx, ty)
		} else {
			curve(&d, x, y, tx, ty)
		}
		class := "edge"
		if v.cycle && u.cycle {
			class = "edge back"
		}
		dv.Edges = append(dv.Edges, dagEdge{D: d.String(), Class: class})
		if e.ports > 1 && v.kind == vNode {
			label := fmt.Sprintf("%d", e.port)
			if u.kind == vParams {
				label = "params"
			}
			dv.Ports = append(dv.Ports, dagText{X: tx - 5, Y: ty - 4, Class: "port", Anchor: "end", Text: label})
		}
	}

	// Boxes, in vertex order (inputs, params, nodes, missing, outputs).
	for i := range vs {
		v := &vs[i]
		if v.kind == vDummy {
			continue
		}
		dv.Boxes = append(dv.Boxes, h.dagBox(v, colX(v.col), p, rc))
	}
	return dv, ""
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func isNodeKind(k vkind) bool { return k == vNode || k == vMissing }

// curve appends a horizontal-tangent cubic from (x1,y1) to (x2,y2).
func curve(d *strings.Builder, x1, y1, x2, y2 int) {
	mx := (x1 + x2) / 2
	fmt.Fprintf(d, " C%d,%d %d,%d %d,%d", mx, y1, mx, y2, x2, y2)
}

func (h *handler) dagBox(v *vertex, x int, p pel.Program, rc *runContext) dagBox {
	b := dagBox{X: x, Y: v.y, W: dagBoxW, H: v.h}
	// Lines are appended in order and centred
	// vertically at the end.
	line := func(class, text string) {
		b.Lines = append(b.Lines, dagText{X: x + dagTextX, Class: class, Text: text})
	}
	ref := func(r asl.Reference) {
		line("sub ref", shortRef(r.String()))
		b.Href = h.artifactURL(r)
		b.Title += "\n" + r.String()
	}
	switch v.kind {
	case vExt:
		b.Class = "term ext"
		b.Title = fmt.Sprintf("external input %d", v.id)
		line("name", fmt.Sprintf("input %d", v.id))
		if rc != nil && rc.hasInputs {
			if int64(v.id) < int64(len(rc.inputs)) {
				ref(rc.inputs[v.id])
			} else {
				b.Class += " absent"
				line("sub", "not given")
				b.Title += ": not given"
			}
		}
	case vParams:
		b.Class = "term params"
		b.Title = "global params"
		line("name", "params")
		if rc != nil && rc.hasInputs {
			if rc.params != nil {
				ref(*rc.params)
			} else {
				b.Class += " absent"
				line("sub", "not given")
				b.Title += ": not given"
			}
		}
	case vOut:
		r := p.Roots[v.id]
		b.Class = "term out"
		b.Title = fmt.Sprintf("output %d: node %d output %d", v.id, r.NodeID, r.OutputIndex)
		line("name", fmt.Sprintf("output %d", v.id))
		if rc != nil && int(v.id) < len(rc.outputs) {
			ref(rc.outputs[v.id])
		} else {
			line("sub", fmt.Sprintf("node %d output %d", r.NodeID, r.OutputIndex))
		}
	case vMissing:
		b.Class = "term missing"
		b.Title = fmt.Sprintf("node %d is named but not in the program", v.id)
		line("name", fmt.Sprintf("missing node %d", v.id))
		line("sub", "not in the program")
	case vNode:
		n := v.node
		op := printable([]byte(n.Op.String()))
		b.Class = "node"
		b.NodeID = fmt.Sprintf("%d", n.ID)
		b.Href = fmt.Sprintf("#node-%d", n.ID)
		b.Title = fmt.Sprintf("node %d: %s", n.ID, op)
		line("op", truncateRunes(op, dagOpRunes))
		sub := fmt.Sprintf("node %d", n.ID)
		var roots []string
		for k, r := range p.Roots {
			if r.NodeID == n.ID {
				roots = append(roots, fmt.Sprintf("%d", k))
			}
		}
		if len(roots) > 0 {
			b.Class += " root"
			sub += " · root " + strings.Join(roots, ",")
		}
		if v.cycle {
			b.Class += " cycle"
			b.Title += " (in a cycle)"
			sub += " · in a cycle"
		}
		line("sub", truncateRunes(sub, dagSubRunes))
		if class, text, _ := rc.nodeState(n.ID); class != "" {
			b.Class += " " + class
			line("st", truncateRunes(text, dagSubRunes))
			b.Title += ": " + text
		}
	}
	y := v.y + (v.h-(len(b.Lines)-1)*dagLineStep)/2 + dagBaseline
	for k := range b.Lines {
		b.Lines[k].Y = y + k*dagLineStep
	}
	return b
}
