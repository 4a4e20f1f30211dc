package pel

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/amduat/amduat/opreg"
)

// The JSON program format (SPECS.md §15) is a human-writable view of a
// Program; it is not an encoding that references are taken of. Example:
//
//	{"nodes":[
//	  {"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"hello"}},
//	  {"id":2,"op":"pel.bytes.concat","version":1,"inputs":[{"node":1,"output":0},{"input":0}]}
//	],"roots":[{"node":2,"output":0}]}
//
// Each input is {"input":I} (external) or {"node":N,"output":K} ("output"
// defaults to 0); each root is {"node":N,"output":K}. "params" is the
// operation's readable form when its registry entry provides one, or
// {"raw":"<hex of ParamsBytes>"} for any operation; omitted params mean the
// readable form's default (for operations without one: empty bytes).
// Unknown members are rejected. Nodes may be listed in any order; they are
// sorted by id.

type jsonProgram struct {
	Nodes []jsonNode `json:"nodes"`
	Roots []jsonRef  `json:"roots"`
}

type jsonNode struct {
	ID      *uint32         `json:"id"`
	Op      *string         `json:"op"`
	Version *uint32         `json:"version"`
	Inputs  []jsonRef       `json:"inputs"`
	Params  json.RawMessage `json:"params"`
}

type jsonRef struct {
	Input  *uint32 `json:"input"`
	Node   *uint32 `json:"node"`
	Output *uint32 `json:"output"`
}

// ProgramFromJSON parses the JSON program format. Operations are looked up
// in reg (nil means opreg.Kernel()) only to parse readable params; unknown
// operations are allowed with raw or omitted params, so invalid programs can
// be written too. The result always encodes (CheckEncodable holds): unsorted
// nodes are sorted, duplicate ids are an error.
func ProgramFromJSON(data []byte, reg *opreg.Registry) (Program, error) {
	if reg == nil {
		reg = opreg.Kernel()
	}
	if json.Valid(data) {
		if err := checkShape(data); err != nil {
			return Program{}, fmt.Errorf("json program: %w", err)
		}
	}
	var jp jsonProgram
	if err := opreg.StrictUnmarshal(data, &jp); err != nil {
		return Program{}, fmt.Errorf("json program: %w", err)
	}
	var p Program
	for k, jn := range jp.Nodes {
		n, err := nodeFromJSON(k, &jn, reg)
		if err != nil {
			return Program{}, err
		}
		p.Nodes = append(p.Nodes, n)
	}
	for k, r := range jp.Roots {
		root, err := rootFromJSON(k, r)
		if err != nil {
			return Program{}, err
		}
		p.Roots = append(p.Roots, root)
	}
	slices.SortStableFunc(p.Nodes, func(a, b Node) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	if err := p.CheckEncodable(); err != nil {
		return Program{}, fmt.Errorf("json program: %w", err)
	}
	return p, nil
}

// nodeFromJSON is the node of nodes[k].
func nodeFromJSON(k int, jn *jsonNode, reg *opreg.Registry) (Node, error) {
	if jn.ID == nil || jn.Op == nil || jn.Version == nil {
		return Node{}, fmt.Errorf("json program: nodes[%d]: \"id\", \"op\" and \"version\" are required", k)
	}
	n := Node{ID: NodeID(*jn.ID), Op: opreg.OperationID{Name: *jn.Op, Version: *jn.Version}}
	if err := opreg.CheckName(n.Op.Name); err != nil {
		return Node{}, fmt.Errorf("json program: node %d: %w", n.ID, err)
	}
	for j, r := range jn.Inputs {
		switch {
		case r.Input != nil && r.Node == nil && r.Output == nil:
			n.Inputs = append(n.Inputs, External(*r.Input))
		case r.Input == nil && r.Node != nil:
			n.Inputs = append(n.Inputs, FromNode(NodeID(*r.Node), deref(r.Output)))
		default:
			return Node{}, fmt.Errorf("json program: node %d input %d: want {\"input\":I} or {\"node\":N,\"output\":K}", n.ID, j)
		}
	}
	params, err := paramsFromJSON(reg, n.Op, jn.Params)
	if err != nil {
		return Node{}, fmt.Errorf("json program: node %d: %w", n.ID, err)
	}
	n.Params = params
	return n, nil
}

// rootFromJSON is the root of roots[k].
func rootFromJSON(k int, r jsonRef) (RootRef, error) {
	if r.Input != nil || r.Node == nil {
		return RootRef{}, fmt.Errorf("json program: roots[%d]: want {\"node\":N,\"output\":K}", k)
	}
	return RootRef{NodeID: NodeID(*r.Node), OutputIndex: deref(r.Output)}, nil
}

func deref(p *uint32) uint32 {
	if p == nil {
		return 0
	}
	return *p
}

// rawParams recognises {"raw":"<hex>"}.
func rawParams(raw json.RawMessage) ([]byte, bool, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) != 1 || m["raw"] == nil {
		return nil, false, nil
	}
	var s string
	if err := json.Unmarshal(m["raw"], &s); err != nil {
		return nil, true, fmt.Errorf("params raw: want a hex string: %w", err)
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, true, fmt.Errorf("params raw: %w", err)
	}
	return b, true, nil
}

func paramsFromJSON(reg *opreg.Registry, id opreg.OperationID, raw json.RawMessage) ([]byte, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		raw = nil
	}
	if raw != nil {
		if b, ok, err := rawParams(raw); ok {
			if b == nil && err == nil {
				b = []byte{}
			}
			return b, err
		}
	}
	op, ok := reg.Lookup(id)
	if !ok || op.ParamsFromJSON == nil {
		if raw != nil {
			return nil, fmt.Errorf("operation %s has no readable params form: write {\"raw\":\"<hex>\"}", id)
		}
		return []byte{}, nil
	}
	v, err := op.ParamsFromJSON(raw)
	if err != nil {
		return nil, err
	}
	return op.EncodeParams(v)
}

// ProgramToJSON renders p in the JSON program format: one node per line,
// members in a fixed order, readable params where reg (nil means
// opreg.Kernel()) offers a form that parses back to the same bytes, raw
// otherwise. The output is deterministic and ProgramFromJSON returns p
// from it. p must be encodable.
func ProgramToJSON(p Program, reg *opreg.Registry) ([]byte, error) {
	if reg == nil {
		reg = opreg.Kernel()
	}
	if err := p.CheckEncodable(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("{\"nodes\":[")
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := opreg.MarshalJSONCompact(n.Op.Name)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\n  {\"id\":%d,\"op\":%s,\"version\":%d", n.ID, name, n.Op.Version)
		if len(n.Inputs) > 0 {
			b.WriteString(",\"inputs\":[")
			for j, in := range n.Inputs {
				if j > 0 {
					b.WriteByte(',')
				}
				if in.Kind == InputExternal {
					fmt.Fprintf(&b, "{\"input\":%d}", in.InputIndex)
				} else {
					fmt.Fprintf(&b, "{\"node\":%d,\"output\":%d}", in.NodeID, in.OutputIndex)
				}
			}
			b.WriteByte(']')
		}
		if pj := paramsToJSON(reg, n.Op, n.Params); pj != nil {
			b.WriteString(",\"params\":")
			b.Write(pj)
		}
		b.WriteByte('}')
	}
	if len(p.Nodes) > 0 {
		b.WriteByte('\n')
	}
	b.WriteString("],\"roots\":[")
	for k, r := range p.Roots {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "{\"node\":%d,\"output\":%d}", r.NodeID, r.OutputIndex)
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}

// paramsToJSON returns the readable form if it round-trips to exactly
// params, else the raw form; nil means "omit".
func paramsToJSON(reg *opreg.Registry, id opreg.OperationID, params []byte) []byte {
	if op, ok := reg.Lookup(id); ok && op.ParamsToJSON != nil {
		if v, err := op.DecodeParams(params); err == nil {
			if j, err := op.ParamsToJSON(v); err == nil {
				if back, err := paramsFromJSON(reg, id, j); err == nil && bytes.Equal(back, params) {
					return j
				}
			}
		}
	} else if len(params) == 0 {
		return nil
	}
	return []byte(`{"raw":` + strconv.Quote(hex.EncodeToString(params)) + `}`)
}

// checkShape refuses what encoding/json would take for an empty value: a
// program, node, input or root that is not a JSON object (null, an array,
// a number, a string), and "nodes", "roots" or "inputs" that are not
// arrays (null included), naming the field (SPECS.md §15). data is valid
// JSON.
func checkShape(data []byte) error {
	var top map[string]json.RawMessage
	if err := wantKind(data, '{', "the program"); err != nil {
		return err
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return err
	}
	if err := shapeList(top["nodes"], `"nodes"`, "nodes", checkNodeShape); err != nil {
		return err
	}
	return shapeList(top["roots"], `"roots"`, "roots", nil)
}

// shapeList checks that raw, when present, is an array of objects, and
// applies each to them.
func shapeList(raw json.RawMessage, field, elem string, each func(k int, v json.RawMessage) error) error {
	if raw == nil {
		return nil
	}
	if err := wantKind(raw, '[', field); err != nil {
		return err
	}
	var vs []json.RawMessage
	if err := json.Unmarshal(raw, &vs); err != nil {
		return err
	}
	for k, v := range vs {
		if err := wantKind(v, '{', fmt.Sprintf("%s[%d]", elem, k)); err != nil {
			return err
		}
		if each != nil {
			if err := each(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkNodeShape checks the "inputs" of nodes[k], the object v.
func checkNodeShape(k int, v json.RawMessage) error {
	var node map[string]json.RawMessage
	if err := json.Unmarshal(v, &node); err != nil {
		return err
	}
	return shapeList(node["inputs"], fmt.Sprintf(`nodes[%d] "inputs"`, k), fmt.Sprintf("nodes[%d].inputs", k), nil)
}

// wantKind checks that the JSON value raw starts with c ('{' an object, '['
// an array); what names the field in the error.
func wantKind(raw []byte, c byte, what string) error {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == c {
		return nil
	}
	want := "an object"
	if c == '[' {
		want = "an array"
	}
	got := "nothing"
	switch {
	case len(t) == 0:
	case t[0] == '{':
		got = "an object"
	case t[0] == '[':
		got = "an array"
	case t[0] == '"':
		got = "a string"
	case t[0] == 'n':
		got = "null"
	case t[0] == 't' || t[0] == 'f':
		got = "a boolean"
	default:
		got = "a number"
	}
	return fmt.Errorf("%s: want %s, got %s", what, want, got)
}
