package pel

import (
	"bytes"
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
)

// compact is a program in the form validation and Exec_DAG work on
// (SPECS.md §14.11): one array per field rather than a Node per node.
// Operation ids are interned (node i runs ops[op[i]]), all DagInputs share
// one backing array, and params are spans of one buffer, shared by nodes of
// the same operation with the same params bytes when a small cache sees
// the repetition (sharing changes no byte anywhere: decoded params are
// immutable). Its nodes are in strictly ascending id order.
type compact struct {
	ids    []NodeID
	op     []uint32 // per node: index into ops
	ops    []opreg.OperationID
	inEnd  []uint32   // per node: its inputs are inputs[inEnd[i-1]:inEnd[i]]
	inputs []DagInput // all nodes' inputs, in node order
	par    []uint32   // per node: index into pars
	pars   []span     // params bytes: pbuf[off:off+n]; each of one operation
	pbuf   []byte
	roots  []RootRef
}

// span is a params value: pbuf[off : off+n].
type span struct{ off, n int }

func (c *compact) len() int { return len(c.ids) }

func (c *compact) inputsOf(i int) []DagInput {
	start := uint32(0)
	if i > 0 {
		start = c.inEnd[i-1]
	}
	if c.inEnd[i] == start {
		return nil
	}
	return c.inputs[start:c.inEnd[i]:c.inEnd[i]]
}

func (c *compact) paramsOf(i int) []byte {
	s := c.pars[c.par[i]]
	return c.pbuf[s.off : s.off+s.n : s.off+s.n]
}

// node is node i as a Node value, sharing c's arrays.
func (c *compact) node(i int) Node {
	return Node{ID: c.ids[i], Op: c.ops[c.op[i]], Inputs: c.inputsOf(i), Params: c.paramsOf(i)}
}

// program expands c into a Program whose Inputs and Params share c's
// arrays.
func (c *compact) program() Program {
	var p Program
	if n := c.len(); n > 0 {
		p.Nodes = make([]Node, n)
		for i := range p.Nodes {
			p.Nodes[i] = c.node(i)
		}
	}
	p.Roots = c.roots
	return p
}

// builder assembles a compact program node by node.
type compactBuilder struct {
	c       compact
	opIndex map[opreg.OperationID]uint32
	names   map[string]string
	lastOp  int      // index of the last op interned, -1 before the first
	parOps  []uint32 // the operation of each pars entry
	cache   [parCacheSize]int32
}

const (
	parCacheSize = 1024 // entries of the params-sharing cache
	parCacheMax  = 256  // longer params are not looked up
)

func newCompactBuilder(nodes int) *compactBuilder {
	b := &compactBuilder{opIndex: map[opreg.OperationID]uint32{}, names: map[string]string{}, lastOp: -1}
	if nodes > 0 {
		b.c.ids = make([]NodeID, 0, nodes)
		b.c.op = make([]uint32, 0, nodes)
		b.c.inEnd = make([]uint32, 0, nodes)
		b.c.par = make([]uint32, 0, nodes)
	}
	for i := range b.cache {
		b.cache[i] = -1
	}
	return b
}

// internOp returns the index of the operation named name (not retained)
// with version v.
func (b *compactBuilder) internOp(name []byte, v uint32) uint32 {
	if b.lastOp >= 0 {
		if last := b.c.ops[b.lastOp]; last.Version == v && last.Name == string(name) {
			return uint32(b.lastOp)
		}
	}
	s, ok := b.names[string(name)]
	if !ok {
		s = string(name)
		b.names[s] = s
	}
	id := opreg.OperationID{Name: s, Version: v}
	k, ok := b.opIndex[id]
	if !ok {
		k = uint32(len(b.c.ops))
		b.c.ops = append(b.c.ops, id)
		b.opIndex[id] = k
	}
	b.lastOp = int(k)
	return k
}

// params adds the params of a node of operation op. With base, the bytes
// are base[off:off+n] and are referred to, not copied (base must then be
// the same array for every call); without, p is copied into c.pbuf.
func (b *compactBuilder) params(op uint32, p []byte, base []byte, off int) uint32 {
	slot := -1
	if len(p) <= parCacheMax {
		h := uint32(2166136261) ^ op*16777619
		for _, x := range p {
			h = (h ^ uint32(x)) * 16777619
		}
		slot = int(h % parCacheSize)
		if k := b.cache[slot]; k >= 0 {
			s := b.c.pars[k]
			if b.parOp(k) == op && bytes.Equal(b.c.pbuf[s.off:s.off+s.n], p) {
				return uint32(k)
			}
		}
	}
	var s span
	if base != nil {
		b.c.pbuf = base
		s = span{off, len(p)}
	} else {
		s = span{len(b.c.pbuf), len(p)}
		b.c.pbuf = append(b.c.pbuf, p...)
	}
	k := len(b.c.pars)
	b.c.pars = append(b.c.pars, s)
	b.parOps = append(b.parOps, op)
	if slot >= 0 {
		b.cache[slot] = int32(k)
	}
	return uint32(k)
}

func (b *compactBuilder) parOp(k int32) uint32 { return b.parOps[k] }

// node appends a node whose inputs were appended to c.inputs already.
func (b *compactBuilder) node(id NodeID, op, par uint32) {
	b.c.ids = append(b.c.ids, id)
	b.c.op = append(b.c.op, op)
	b.c.par = append(b.c.par, par)
	b.c.inEnd = append(b.c.inEnd, uint32(len(b.c.inputs)))
}

// fromProgram is p in compact form, sharing p's params bytes. p must pass
// CheckEncodable.
func fromProgram(p *Program) (*compact, *ProgramError) {
	inputs := 0
	for i := range p.Nodes {
		inputs += len(p.Nodes[i].Inputs)
	}
	if inputs > math.MaxUint32 {
		return nil, programErr(DiagProgramMalformed, nil, "program has %d inputs, more than this implementation supports", inputs)
	}
	b := newCompactBuilder(len(p.Nodes))
	b.c.inputs = make([]DagInput, 0, inputs)
	for i := range p.Nodes {
		n := &p.Nodes[i]
		op := b.internOp([]byte(n.Op.Name), n.Op.Version)
		b.c.inputs = append(b.c.inputs, n.Inputs...)
		b.node(n.ID, op, b.params(op, n.Params, nil, 0))
	}
	b.c.roots = p.Roots
	b.parOps = nil
	return &b.c, nil
}

// decodeCompact parses ProgramBytes strictly (the rules of DecodeProgram).
// With alias the params refer to b; without, they are copied, so that b
// can be dropped once decoded.
func decodeCompact(b []byte, alias bool) (*compact, error) {
	d := decoder{r: enc.NewReader(b)}
	r := d.r
	nn := r.Count("node_count", minNodeSize)
	if r.Err() != nil {
		return nil, d.fail()
	}
	cb := newCompactBuilder(nn)
	if ni := countInputs(b, r.Offset(), nn); ni > 0 {
		cb.c.inputs = make([]DagInput, 0, ni)
	}
	var base []byte
	if alias {
		base = b
	}
	for i := 0; i < nn; i++ {
		idOff := r.Offset()
		id := NodeID(r.U32("node_id"))
		if r.Err() != nil {
			return nil, d.fail()
		}
		if i > 0 && id <= cb.c.ids[i-1] {
			return nil, checkOrder(cb.c.ids[i-1], id, &enc.DecodeError{Offset: idOff, Field: "node_id", Reason: "not greater than the previous node_id"})
		}
		nameOff := r.Offset()
		name := bytes32(r, "op_name length", "op_name")
		if r.Err() == nil {
			switch {
			case len(name) == 0:
				r.FailAt(nameOff, "op_name", "empty")
			case len(name) > opreg.MaxNameLen:
				r.FailAt(nameOff, "op_name", "%d bytes exceed the maximum %d", len(name), opreg.MaxNameLen)
			case !utf8.Valid(name):
				r.FailAt(nameOff, "op_name", "not valid UTF-8")
			}
		}
		version := r.U32("op_version")
		ni := r.Count("input_count", minInputSize)
		if r.Err() != nil {
			return nil, d.fail()
		}
		op := cb.internOp(name, version)
		for j := 0; j < ni; j++ {
			tagOff := r.Offset()
			var in DagInput
			switch tag := r.U8("input_tag"); {
			case r.Err() != nil:
			case tag == uint8(InputExternal):
				in.InputIndex = r.U32("input_index")
			case tag == uint8(InputNode):
				in.Kind = InputNode
				in.NodeID = NodeID(r.U32("input_node_id"))
				in.OutputIndex = r.U32("output_index")
			default:
				r.FailAt(tagOff, "input_tag", "value 0x%02x is neither 0x00 nor 0x01", tag)
			}
			if r.Err() != nil {
				return nil, d.fail()
			}
			cb.c.inputs = append(cb.c.inputs, in)
		}
		if len(cb.c.inputs) > math.MaxUint32 {
			return nil, programErr(DiagProgramMalformed, nil, "program has %d inputs, more than this implementation supports", len(cb.c.inputs))
		}
		pOff := r.Offset() + 4
		params := bytes32(r, "params length", "params")
		if r.Err() != nil {
			return nil, d.fail()
		}
		cb.node(id, op, cb.params(op, params, base, pOff))
	}
	nr := r.Count("root_count", minRootSize)
	if r.Err() != nil {
		return nil, d.fail()
	}
	if nr > 0 {
		cb.c.roots = make([]RootRef, nr)
	}
	for i := range cb.c.roots {
		cb.c.roots[i] = RootRef{NodeID: NodeID(r.U32("root_node_id")), OutputIndex: r.U32("root_output_index")}
	}
	if r.Done() != nil {
		return nil, d.fail()
	}
	if alias && cb.c.pbuf == nil {
		cb.c.pbuf = b
	}
	cb.parOps = nil
	return &cb.c, nil
}

// countInputs is the number of DagInputs of the nn nodes encoded from
// b[off:], read without checking anything else, so that they are
// allocated once. Malformed bytes end the count early (the decoder then
// reports them); the count is at most len(b)/minInputSize.
func countInputs(b []byte, off, nn int) int {
	total := 0
	u32 := func() (int, bool) {
		if len(b)-off < 4 {
			return 0, false
		}
		v := int(binary.BigEndian.Uint32(b[off:]))
		off += 4
		return v, true
	}
	for i := 0; i < nn; i++ {
		off += 4 // node_id
		n, ok := u32()
		if !ok || n > len(b)-off {
			return total
		}
		off += n + 4 // op_name, op_version
		ni, ok := u32()
		if !ok || ni > (len(b)-off)/minInputSize {
			return total
		}
		for j := 0; j < ni; j++ {
			if off >= len(b) {
				return total
			}
			if b[off] == uint8(InputNode) {
				off += 9
			} else {
				off += 5
			}
		}
		total += ni
		n, ok = u32()
		if !ok || n > len(b)-off {
			return total
		}
		off += n
	}
	return total
}
