// Package tgk implements the part of TGK/1 this project uses: provenance
// edges stored as ordinary artifacts tagged TYPE_TAG_TGK1_EDGE_V1
// (0x00000201) with the encoding ENC/TGK1-EDGE/1 (SPECS.md §17), and the
// store index that answers reverse questions ("what produced this?", "what
// was computed from this?") without scanning.
//
// The edge layout, edge type ids and roles are this project's own; the
// published TGK/1 documents give only the type tag and the profile label.
package tgk

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
)

// EdgeType identifies what an edge means.
type EdgeType uint32

// EdgeTypePELRun links one surface run's request to what it produced: from
// the program, inputs and params to the outputs, the result and the trace.
const EdgeTypePELRun EdgeType = 0x00000001

// EdgeTypePlanEffect links one effect attempt of a plan (SPECS.md §24.7)
// to what it left: from the EFFECT-REQUEST/1 artifact and the inputs the
// request names to the receipt and the outputs the receipt names, so that
// why(output) reaches the call that produced it.
const EdgeTypePlanEffect EdgeType = 0x00000002

// Role says what an endpoint is within its edge.
type Role uint8

const (
	RoleProgram Role = 0x01
	RoleInput   Role = 0x02
	RoleParams  Role = 0x03
	RoleOutput  Role = 0x04
	RoleResult  Role = 0x05
	RoleTrace   Role = 0x06
	RoleRequest Role = 0x07 // an effect request (PLAN_EFFECT)
	RoleReceipt Role = 0x08 // an effect attempt's receipt (PLAN_EFFECT)
)

var roleNames = map[Role]string{RoleProgram: "program", RoleInput: "input", RoleParams: "params",
	RoleOutput: "output", RoleResult: "result", RoleTrace: "trace", RoleRequest: "request", RoleReceipt: "receipt"}

func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role-0x%02x", uint8(r))
}

// Endpoint is one end of an edge.
type Endpoint struct {
	Role Role
	Ref  asl.Reference
}

// Edge is a TGK/1 edge: a typed relation from some artifacts to others.
// Within each list, endpoints keep the order of their roles' meaning (for a
// run: program, inputs in order, params; outputs in order, result, trace).
type Edge struct {
	Type EdgeType
	From []Endpoint
	To   []Endpoint
}

// minEndpoint is role u8 plus the smallest EncodedRef (6 bytes).
const minEndpoint = 7

// Append appends EdgeBytes (SPECS.md §17.1):
//
//	edge_type u32 || list<Endpoint> from || list<Endpoint> to
//	Endpoint = role u8 || ref EncodedRef
func Append(dst []byte, e Edge) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	w := enc.Writer{Buf: dst}
	w.U32(uint32(e.Type))
	for _, list := range [][]Endpoint{e.From, e.To} {
		w.U32(uint32(len(list)))
		for _, ep := range list {
			w.U8(uint8(ep.Role))
			w.Buf = asl.AppendEncodedRef(w.Buf, ep.Ref)
		}
	}
	return w.Buf, nil
}

// Validate checks that both lists are non-empty, every role is defined and
// every reference is non-zero.
func (e Edge) Validate() error {
	if len(e.From) == 0 || len(e.To) == 0 {
		return fmt.Errorf("edge: %d from and %d to endpoints; both must be non-empty", len(e.From), len(e.To))
	}
	for _, ep := range append(append([]Endpoint(nil), e.From...), e.To...) {
		if _, ok := roleNames[ep.Role]; !ok {
			return fmt.Errorf("edge: undefined role 0x%02x", uint8(ep.Role))
		}
		if ep.Ref.IsZero() {
			return fmt.Errorf("edge: zero reference with role %s", ep.Role)
		}
	}
	return nil
}

// Decode parses EdgeBytes strictly: truncation, counts the input cannot hold
// (at 7 bytes per endpoint, checked before allocating), malformed references,
// an undefined role, an empty list, and trailing bytes are rejected.
func Decode(b []byte) (Edge, error) {
	r := enc.NewReader(b)
	e := Edge{Type: EdgeType(r.U32("edge_type"))}
	for i, field := range []string{"from", "to"} {
		off := r.Offset()
		n := r.Count(field+".count", minEndpoint)
		if r.Err() != nil {
			return Edge{}, r.Err()
		}
		if n == 0 {
			return Edge{}, r.FailAt(off, field+".count", "an edge needs at least one %s endpoint", field)
		}
		list := make([]Endpoint, n)
		for j := range list {
			roleOff := r.Offset()
			list[j].Role = Role(r.U8(field + ".role"))
			if r.Err() != nil {
				return Edge{}, r.Err()
			}
			if _, ok := roleNames[list[j].Role]; !ok {
				return Edge{}, r.FailAt(roleOff, field+".role", "undefined role 0x%02x", uint8(list[j].Role))
			}
			ref, err := asl.ReadEncodedRef(r, field+".ref")
			if err != nil {
				return Edge{}, err
			}
			list[j].Ref = ref
		}
		if i == 0 {
			e.From = list
		} else {
			e.To = list
		}
	}
	if err := r.Done(); err != nil {
		return Edge{}, err
	}
	return e, nil
}

// Artifact returns e as an edge artifact tagged TYPE_TAG_TGK1_EDGE_V1.
func (e Edge) Artifact() (asl.Artifact, error) {
	b, err := Append(nil, e)
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(asl.TagTGK1EdgeV1, b), nil
}

// DecodeArtifact checks the edge type tag and decodes a's bytes.
func DecodeArtifact(a asl.Artifact) (Edge, error) {
	if !a.HasTag || a.Tag != asl.TagTGK1EdgeV1 {
		return Edge{}, fmt.Errorf("artifact type tag %s is not TYPE_TAG_TGK1_EDGE_V1 (0x00000201): %w", a.Header().TagString(), enc.ErrMalformed)
	}
	return Decode(a.Bytes)
}
