package pel

import (
	"bytes"
	"slices"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
)

// NodeID identifies a node within a program (seed §2.3); ordered as an
// unsigned integer.
type NodeID uint32

// InputKind selects the form of a DagInput; its values are the tags written
// in ProgramBytes (SPECS.md §9).
type InputKind uint8

const (
	// InputExternal reads Exec_DAG's inputs[InputIndex].
	InputExternal InputKind = 0x00
	// InputNode reads output OutputIndex of node NodeID.
	InputNode InputKind = 0x01
)

// DagInput is one input of a node (seed §2.4). For InputExternal only
// InputIndex is meaningful and NodeID and OutputIndex are zero; for
// InputNode InputIndex is zero. Build them with External and FromNode.
type DagInput struct {
	Kind        InputKind
	InputIndex  uint32
	NodeID      NodeID
	OutputIndex uint32
}

// External returns DagInputExternal{input_index: i}.
func External(i uint32) DagInput { return DagInput{Kind: InputExternal, InputIndex: i} }

// FromNode returns DagInputNode{node_id: id, output_index: out}.
func FromNode(id NodeID, out uint32) DagInput {
	return DagInput{Kind: InputNode, NodeID: id, OutputIndex: out}
}

// RootRef designates one scheme output (seed §2.4).
type RootRef struct {
	NodeID      NodeID
	OutputIndex uint32
}

// Node is one operation application (seed §2.5). Params holds the
// ParamsBytes, embedded in the program.
type Node struct {
	ID     NodeID
	Op     opreg.OperationID
	Inputs []DagInput
	Params []byte
}

// Program is a DAG program (seed §2.6). A Program that encodes has its Nodes
// in strictly ascending ID order (so IDs are unique), well-formed op names
// and canonical DagInputs; CheckEncodable reports violations.
type Program struct {
	Nodes []Node
	Roots []RootRef
}

// Minimum encoded sizes used for count checks before allocating.
const (
	minNodeSize  = 4 + 4 + 1 + 4 + 4 + 4 // id, name length, 1-byte name, version, input count, params length
	minInputSize = 1 + 4                 // tag, input_index
	minRootSize  = 4 + 4
)

// CheckEncodable reports the first reason p has no ProgramBytes: nodes not
// in strictly ascending id order (a *ProgramError with code
// DiagDuplicateNodeID or DiagNodeOrder), a malformed op name, a DagInput with
// an unknown kind or non-zero fields its kind does not use, or params longer
// than 2^32-1 bytes.
func (p Program) CheckEncodable() error {
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if i > 0 {
			if err := checkOrder(p.Nodes[i-1].ID, n.ID, nil); err != nil {
				return err
			}
		}
		if err := opreg.CheckName(n.Op.Name); err != nil {
			return programErr(DiagProgramMalformed, nil, "node %d: %v", n.ID, err)
		}
		for j, in := range n.Inputs {
			switch {
			case in.Kind == InputExternal && (in.NodeID != 0 || in.OutputIndex != 0):
				return programErr(DiagProgramMalformed, nil, "node %d input %d: external input with non-zero node fields", n.ID, j)
			case in.Kind == InputNode && in.InputIndex != 0:
				return programErr(DiagProgramMalformed, nil, "node %d input %d: node input with non-zero input_index", n.ID, j)
			case in.Kind != InputExternal && in.Kind != InputNode:
				return programErr(DiagProgramMalformed, nil, "node %d input %d: unknown input kind 0x%02x", n.ID, j, uint8(in.Kind))
			}
		}
		if uint64(len(n.Params)) > 0xFFFFFFFF || uint64(len(n.Inputs)) > 0xFFFFFFFF {
			return programErr(DiagProgramMalformed, nil, "node %d: params or inputs too long", n.ID)
		}
	}
	return nil
}

// checkOrder enforces strictly ascending node ids. de, if non-nil, is the
// decode error position to wrap.
func checkOrder(prev, cur NodeID, de *enc.DecodeError) error {
	switch {
	case cur == prev:
		return programErr(DiagDuplicateNodeID, de, "duplicate node id %d", cur)
	case cur < prev:
		return programErr(DiagNodeOrder, de, "node id %d follows node id %d; nodes must be in ascending id order", cur, prev)
	}
	return nil
}

// AppendProgram appends ProgramBytes (SPECS.md §9.1):
//
//	node_count u32 || Node* || root_count u32 || RootRef*
//	Node     = node_id u32 || op_name bytes32 || op_version u32 ||
//	           input_count u32 || DagInput* || params bytes32
//	DagInput = 0x00 || input_index u32  |  0x01 || node_id u32 || output_index u32
//	RootRef  = node_id u32 || output_index u32
//
// It fails if p does not pass CheckEncodable.
func AppendProgram(dst []byte, p Program) ([]byte, error) {
	if err := p.CheckEncodable(); err != nil {
		return nil, err
	}
	w := enc.Writer{Buf: dst}
	w.U32(uint32(len(p.Nodes)))
	for i := range p.Nodes {
		w.Buf = appendNode(w.Buf, &p.Nodes[i])
	}
	return appendRoots(w.Buf, p.Roots), nil
}

// appendNode appends the Node of ProgramBytes for n, which is encodable.
func appendNode(dst []byte, n *Node) []byte {
	w := enc.Writer{Buf: dst}
	w.U32(uint32(n.ID))
	w.U32(uint32(len(n.Op.Name)))
	w.Buf = append(w.Buf, n.Op.Name...)
	w.U32(n.Op.Version)
	w.U32(uint32(len(n.Inputs)))
	for _, in := range n.Inputs {
		w.U8(uint8(in.Kind))
		if in.Kind == InputExternal {
			w.U32(in.InputIndex)
		} else {
			w.U32(uint32(in.NodeID))
			w.U32(in.OutputIndex)
		}
	}
	w.Bytes32(n.Params)
	return w.Buf
}

// appendRoots appends root_count and the RootRefs of ProgramBytes.
func appendRoots(dst []byte, roots []RootRef) []byte {
	w := enc.Writer{Buf: dst}
	w.U32(uint32(len(roots)))
	for _, r := range roots {
		w.U32(uint32(r.NodeID))
		w.U32(r.OutputIndex)
	}
	return w.Buf
}

// EncodeProgram returns the ProgramBytes of p.
func EncodeProgram(p Program) ([]byte, error) {
	return AppendProgram(make([]byte, 0, encodedSizeHint(p)), p)
}

func encodedSizeHint(p Program) int {
	n := 8 + minRootSize*len(p.Roots)
	for i := range p.Nodes {
		n += minNodeSize - 1 + len(p.Nodes[i].Op.Name) + 9*len(p.Nodes[i].Inputs) + len(p.Nodes[i].Params)
	}
	return n
}

// ProgramArtifact returns p as a program artifact: its ProgramBytes tagged
// TYPE_TAG_PEL_PROGRAM_DAG_1 (0x00000101).
func ProgramArtifact(p Program) (asl.Artifact, error) {
	b, err := EncodeProgram(p)
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(asl.TagPELProgramDAG1, b), nil
}

// DecodeProgram parses ProgramBytes strictly (SPECS.md §9.2). Rejected:
// truncation; a count the remaining bytes cannot hold at the minimum element
// size (node 21, DagInput 5, root 8 bytes), checked before allocating; an
// op_name that is empty, longer than 255 bytes or not UTF-8; a DagInput tag
// other than 0x00 and 0x01; a node_id not greater than the previous node's
// (DiagDuplicateNodeID / DiagNodeOrder); trailing bytes. Every error is a
// *ProgramError that wraps an *enc.DecodeError naming the field and offset.
//
// The program's Params alias b; op names are copied (and interned, so a
// program repeating one name holds one string), and all nodes' Inputs
// share one backing array.
func DecodeProgram(b []byte) (Program, error) {
	c, err := decodeCompact(b, true)
	if err != nil {
		return Program{}, err
	}
	return c.program(), nil
}

type decoder struct {
	r *enc.Reader
}

func (d *decoder) fail() error {
	de, _ := d.r.Err().(*enc.DecodeError)
	if de == nil {
		return programErr(DiagProgramMalformed, nil, "program bytes malformed: %v", d.r.Err())
	}
	return programErr(DiagProgramMalformed, de, "program bytes malformed: field %s at offset %d", de.Field, de.Offset)
}

// bytes32 is enc.Reader.Bytes32 with both field names given, so the hot
// decode loop builds no strings.
func bytes32(r *enc.Reader, lenField, field string) []byte {
	start := r.Offset()
	n := r.U32(lenField)
	if r.Err() != nil {
		return nil
	}
	if uint64(n) > uint64(r.Remaining()) {
		r.FailAt(start, field, "length %d exceeds the %d bytes remaining", n, r.Remaining())
		return nil
	}
	return r.Raw(int(n), field)
}

// DecodeProgramArtifact checks that a carries TYPE_TAG_PEL_PROGRAM_DAG_1
// (DiagProgramTypeTag otherwise) and decodes its bytes.
func DecodeProgramArtifact(a asl.Artifact) (Program, error) {
	if err := checkProgramTag(a); err != nil {
		return Program{}, err
	}
	return DecodeProgram(a.Bytes)
}

func checkProgramTag(a asl.Artifact) error {
	if !a.HasTag || a.Tag != asl.TagPELProgramDAG1 {
		return programErr(DiagProgramTypeTag, nil, "program artifact type tag is %s, want 0x%08x", a.Header().TagString(), uint32(asl.TagPELProgramDAG1))
	}
	return nil
}

// Equal reports whether p and q are the same Program value. Nil and empty
// slices are equal, so DecodeProgram(EncodeProgram(p)) is Equal to p.
func (p Program) Equal(q Program) bool {
	if len(p.Nodes) != len(q.Nodes) || !slices.Equal(p.Roots, q.Roots) {
		return false
	}
	for i := range p.Nodes {
		a, b := &p.Nodes[i], &q.Nodes[i]
		if a.ID != b.ID || a.Op != b.Op || !slices.Equal(a.Inputs, b.Inputs) || !bytes.Equal(a.Params, b.Params) {
			return false
		}
	}
	return true
}

// OperationID is opreg.OperationID, re-exported so that layers above pel
// need not import opreg.
type OperationID = opreg.OperationID

// CheckOpName is opreg.CheckName: 1 to 255 bytes of valid UTF-8.
func CheckOpName(name string) error { return opreg.CheckName(name) }
