package pel

import (
	"fmt"
	"math"
	"slices"

	"github.com/amduat/amduat/opreg"
)

// graph is the dependency structure of a structurally valid program, in
// node indices (positions in Program.Nodes, which is sorted by id, so index
// order is id order).
type graph struct {
	order []int32 // canonical topological order (seed §4.1)
	uses  []int32 // per node: DagInputNode references to it plus RootRefs naming it
}

// nodeIndex maps a NodeID to its index in a program's sorted node ids.
type nodeIndex struct {
	ids   []NodeID
	dense bool // ids are ids[0], ids[0]+1, ...
	first NodeID
}

func newNodeIndex(ids []NodeID) nodeIndex {
	x := nodeIndex{ids: ids}
	if len(ids) > 0 {
		x.first = ids[0]
		x.dense = uint64(ids[len(ids)-1]-x.first) == uint64(len(ids)-1)
	}
	return x
}

func (x nodeIndex) find(id NodeID) (int32, bool) {
	if x.dense {
		if id < x.first || uint64(id-x.first) >= uint64(len(x.ids)) {
			return 0, false
		}
		return int32(id - x.first), true
	}
	i, ok := slices.BinarySearch(x.ids, id)
	return int32(i), ok
}

// checkStructure applies seed §3 rules 2-4 to a program whose nodes are
// already strictly ascending, in this order (SPECS.md §12.2): every
// DagInputNode in node order then input order (missing target, then self
// reference), every RootRef in order, then acyclicity. It returns the
// canonical order.
func checkStructure(p *compact) (graph, *ProgramError) {
	n := p.len()
	if n > math.MaxInt32 {
		return graph{}, programErr(DiagProgramMalformed, nil, "program has %d nodes, more than this implementation supports", n)
	}
	x := newNodeIndex(p.ids)
	edges := 0
	for _, in := range p.inputs {
		if in.Kind == InputNode {
			edges++
		}
	}
	if edges > math.MaxInt32 {
		return graph{}, programErr(DiagProgramMalformed, nil, "program has %d node inputs, more than this implementation supports", edges)
	}
	indeg := make([]int32, n)
	uses := make([]int32, n)
	start := make([]int32, n+1)
	tgt := make([]int32, 0, edges) // target index of each DagInputNode, in program order
	for i := 0; i < n; i++ {
		id := p.ids[i]
		for j, in := range p.inputsOf(i) {
			if in.Kind != InputNode {
				continue
			}
			t, ok := x.find(in.NodeID)
			switch {
			case !ok:
				return graph{}, programErr(DiagDanglingInput, nil, "node %d input %d refers to missing node %d", id, j, in.NodeID)
			case int(t) == i:
				return graph{}, programErr(DiagSelfLoop, nil, "node %d input %d refers to node %d itself", id, j, id)
			}
			tgt = append(tgt, t)
			indeg[i]++
			uses[t]++
			start[t+1]++
		}
	}
	for k, r := range p.roots {
		t, ok := x.find(r.NodeID)
		if !ok {
			return graph{}, programErr(DiagDanglingRoot, nil, "root %d refers to missing node %d", k, r.NodeID)
		}
		uses[t]++
	}

	// Dependents in compressed-sparse-row form: deps[start[t]:start[t+1]]
	// are the nodes that read node t, one entry per reading DagInput.
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	deps := make([]int32, edges)
	fill := slices.Clone(start[:n])
	k := 0
	for i := 0; i < n; i++ {
		for range indeg[i] {
			t := tgt[k]
			k++
			deps[fill[t]] = int32(i)
			fill[t]++
		}
	}
	tgt, fill = nil, nil

	// Kahn's algorithm with a min-heap over ready node indices: the ready
	// node with the smallest id is placed next (seed §4.1).
	order := make([]int32, 0, n)
	var h minHeap
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			h = append(h, int32(i)) // ascending, hence already a heap
		}
	}
	for len(h) > 0 {
		v := h.pop()
		order = append(order, v)
		for _, d := range deps[start[v]:start[v+1]] {
			if indeg[d]--; indeg[d] == 0 {
				h.push(d)
			}
		}
	}
	if len(order) < n {
		lowest := -1
		for i := 0; i < n; i++ {
			if indeg[i] > 0 {
				lowest = i
				break
			}
		}
		return graph{}, programErr(DiagCycle, nil, "dependency cycle: %d nodes cannot be ordered, lowest node id %d", n-len(order), p.ids[lowest])
	}
	return graph{order: order, uses: uses}, nil
}

// minHeap is a binary min-heap of node indices.
type minHeap []int32

func (h *minHeap) push(v int32) {
	a := append(*h, v)
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p] <= v {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = v
	*h = a
}

func (h *minHeap) pop() int32 {
	a := *h
	top := a[0]
	last := a[len(a)-1]
	a = a[:len(a)-1]
	if len(a) > 0 {
		i := 0
		for {
			c := 2*i + 1
			if c >= len(a) {
				break
			}
			if c+1 < len(a) && a[c+1] < a[c] {
				c++
			}
			if last <= a[c] {
				break
			}
			a[i] = a[c]
			i = c
		}
		a[i] = last
	}
	*h = a
	return top
}

// CheckStructure reports whether p is structurally valid (seed §3 rules 1-5):
// encodable (ascending unique ids, well-formed op names), every DagInputNode
// and RootRef names an existing node, no node reads itself, and the
// dependency graph is acyclic. Errors are *ProgramError. Rule 6 and §3.1
// (operations and params) need a registry: see Prepare.
func CheckStructure(p Program) error {
	if err := p.CheckEncodable(); err != nil {
		return err
	}
	c, perr := fromProgram(&p)
	if perr != nil {
		return perr
	}
	if _, err := checkStructure(c); err != nil {
		return err
	}
	return nil
}

// CanonicalOrder returns the canonical topological order of p (seed §4.1):
// repeatedly place the ready node with the smallest id. It runs in
// O((N+E) log N) time without recursion, and fails with a *ProgramError if
// p is not structurally valid.
func CanonicalOrder(p Program) ([]NodeID, error) {
	if err := p.CheckEncodable(); err != nil {
		return nil, err
	}
	c, perr := fromProgram(&p)
	if perr != nil {
		return nil, perr
	}
	g, perr := checkStructure(c)
	if perr != nil {
		return nil, perr
	}
	ids := make([]NodeID, len(g.order))
	for k, i := range g.order {
		ids[k] = c.ids[i]
	}
	return ids, nil
}

// Plan is a program validated against a registry and ready to run: its
// structure holds (seed §3), every operation is registered and accepts the
// node's input count, every node's params decoded (§3.1), and the canonical
// order is computed (§4). A Plan is immutable and safe for concurrent Runs.
//
// A Plan holds the program in compact form (SPECS.md §14.11): operations
// are resolved and params decoded once per distinct operation and params
// value, not once per node.
type Plan struct {
	c      *compact
	g      graph
	ops    []*opreg.Operation // per c.ops entry
	params []any              // per c.pars entry
}

// opOf is the operation of node index i.
func (pl *Plan) opOf(i int32) *opreg.Operation { return pl.ops[pl.c.op[i]] }

// paramsOf is the decoded params of node index i.
func (pl *Plan) paramsOf(i int32) any { return pl.params[pl.c.par[i]] }

// Prepare validates p against reg (nil means opreg.Kernel()) in the order
// Exec_DAG uses (SPECS.md §12.2): encodability, structure, then unknown
// operations (lowest node id first), then per node in ascending id order
// arity and params decoding. Errors are *ProgramError. The plan keeps p,
// which must not be modified afterwards.
func Prepare(p Program, reg *opreg.Registry) (*Plan, error) {
	if err := p.CheckEncodable(); err != nil {
		return nil, err
	}
	c, perr := fromProgram(&p)
	if perr != nil {
		return nil, perr
	}
	pl, perr, err := prepare(c, reg)
	if perr != nil {
		return nil, perr
	}
	return pl, err
}

// prepare returns a *ProgramError for an invalid program, or an
// *InternalError when an operation's DecodeParams panicked.
func prepare(p *compact, reg *opreg.Registry) (*Plan, *ProgramError, error) {
	if reg == nil {
		reg = opreg.Kernel()
	}
	g, perr := checkStructure(p)
	if perr != nil {
		return nil, perr, nil
	}
	// Operations are looked up in node order, so the unknown one reported
	// is that of the lowest node id.
	ops := make([]*opreg.Operation, len(p.ops))
	for i, k := range p.op {
		if ops[k] != nil {
			continue
		}
		op, ok := reg.Lookup(p.ops[k])
		if !ok {
			return nil, programErr(DiagUnknownOperation, nil, "node %d: unknown operation %s", p.ids[i], opText(p.ops[k])), nil
		}
		ops[k] = op
	}
	// A params value is of one operation: decoding it once, at its first
	// node, reports what decoding it at every node would, at the first.
	params := make([]any, len(p.pars))
	decoded := make([]bool, len(p.pars))
	for i, k := range p.op {
		id, op := p.ids[i], ops[k]
		inputs := len(p.inputsOf(i))
		if !op.AcceptsInputs(inputs) {
			return nil, programErr(DiagArity, nil, "node %d: operation %s takes %s inputs, got %d", id, opText(op.ID), op.ArityString(), inputs), nil
		}
		pk := p.par[i]
		if decoded[pk] {
			continue
		}
		var v any
		var err error
		raw := p.paramsOf(i)
		if ierr := contain(id, op.ID, "params", func() { v, err = op.DecodeParams(raw) }); ierr != nil {
			return nil, nil, ierr
		}
		if err != nil {
			return nil, programErr(DiagParamsDecode, nil, "node %d: params of operation %s do not decode", id, opText(op.ID)), nil
		}
		params[pk], decoded[pk] = v, true
	}
	return &Plan{c: p, g: g, ops: ops, params: params}, nil, nil
}

// Program returns the planned program: a Program sharing the plan's
// arrays (do not modify).
func (pl *Plan) Program() Program { return pl.c.program() }

// Order returns the canonical topological order (seed §4.1) as node ids.
func (pl *Plan) Order() []NodeID {
	ids := make([]NodeID, len(pl.g.order))
	for k, i := range pl.g.order {
		ids[k] = pl.c.ids[i]
	}
	return ids
}

// Params returns the decoded params value of the node with the given id.
func (pl *Plan) Params(id NodeID) (any, error) {
	i, ok := newNodeIndex(pl.c.ids).find(id)
	if !ok {
		return nil, fmt.Errorf("no node %d", id)
	}
	return pl.paramsOf(i), nil
}

// PrepareBytes is Prepare(DecodeProgram(b), reg) without the Program: it
// decodes ProgramBytes into the plan's compact form (SPECS.md §14.11).
// Errors are DecodeProgram's, then Prepare's. The plan's params alias b.
func PrepareBytes(b []byte, reg *opreg.Registry) (*Plan, error) {
	c, err := decodeCompact(b, true)
	if err != nil {
		return nil, err
	}
	pl, perr, err := prepare(c, reg)
	if perr != nil {
		return nil, perr
	}
	return pl, err
}
