package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
)

// Kinds for TGK/1 edges (SPECS.md §17) and the surface's derived keys
// (§14.6, §14.10).
const (
	// edge_encode: {"edge":edgeVec} -> {"edge_bytes":hex,"reference":text}
	// (tag 0x00000201, SHA-256).
	KindEdgeEncode = "edge_encode"
	// edge_decode: {"edge_bytes":hex} -> {"edge":edgeVec} or {"reject":...}.
	KindEdgeDecode = "edge_decode"
	// request_key: {"request":requestVec,"hash_id":N,"salt":hex} -> {"key":hex}.
	KindRequestKey = "request_key"
	// node_key: {"op","version","params":hex,"inputs":[artifact],
	// "global":artifact|null,"hash_id":N,"salt":hex} -> {"key":hex}.
	KindNodeKey = "node_key"

	specEdge       = "§17.1"
	specRequestKey = "§14.6"
	specNodeKey    = "§14.10"
)

func init() {
	Register(KindEdgeEncode, checkEdgeEncode)
	Register(KindEdgeDecode, checkEdgeDecode)
	Register(KindRequestKey, checkRequestKey)
	Register(KindNodeKey, checkNodeKey)
	RegisterGenerator("tgk.edge", genTGKEdge)
	RegisterGenerator("surf.keys", genSurfKeys)
}

type endpointVec struct {
	Role uint8  `json:"role"`
	Ref  string `json:"ref"`
}

type edgeVec struct {
	Type uint32        `json:"edge_type"`
	From []endpointVec `json:"from"`
	To   []endpointVec `json:"to"`
}

func edgeToVec(e tgk.Edge) edgeVec {
	conv := func(eps []tgk.Endpoint) []endpointVec {
		out := make([]endpointVec, len(eps))
		for i, ep := range eps {
			out[i] = endpointVec{uint8(ep.Role), ep.Ref.String()}
		}
		return out
	}
	return edgeVec{uint32(e.Type), conv(e.From), conv(e.To)}
}

func (v edgeVec) edge() (tgk.Edge, error) {
	conv := func(eps []endpointVec) ([]tgk.Endpoint, error) {
		out := make([]tgk.Endpoint, len(eps))
		for i, ep := range eps {
			ref, err := asl.ParseReference(ep.Ref)
			if err != nil {
				return nil, err
			}
			out[i] = tgk.Endpoint{Role: tgk.Role(ep.Role), Ref: ref}
		}
		return out, nil
	}
	from, err := conv(v.From)
	if err != nil {
		return tgk.Edge{}, err
	}
	to, err := conv(v.To)
	return tgk.Edge{Type: tgk.EdgeType(v.Type), From: from, To: to}, err
}

type edgeInput struct {
	Edge *edgeVec `json:"edge"`
}

type edgeEncodeExpect struct {
	EdgeBytes *Hex   `json:"edge_bytes"`
	Reference string `json:"reference"`
}

type edgeBytesInput struct {
	EdgeBytes *Hex `json:"edge_bytes"`
}

// edgeDecodeExpect holds exactly one of edge and reject; the other member
// is absent (§7.4).
type edgeDecodeExpect struct {
	Edge   *edgeVec `json:"edge,omitempty"`
	Reject *Reject  `json:"reject,omitempty"`
}

func equalEdgeVec(a, b edgeVec) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func checkEdgeEncode(_ context.Context, v Vector) error {
	var in edgeInput
	var exp edgeEncodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.edge and expect.edge_bytes", in.Edge != nil && exp.EdgeBytes != nil); err != nil {
		return err
	}
	e, err := in.Edge.edge()
	if err != nil {
		return fmt.Errorf("bad vector: %v", err)
	}
	b, err := tgk.Append(nil, e)
	if err != nil {
		return fmt.Errorf("encode: %v", err)
	}
	if err := eqBytes("EdgeBytes", b, *exp.EdgeBytes); err != nil {
		return err
	}
	if ref := asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagTGK1EdgeV1, b)); ref.String() != exp.Reference {
		return fmt.Errorf("edge reference = %s, want %s", ref, exp.Reference)
	}
	return nil
}

func checkEdgeDecode(_ context.Context, v Vector) error {
	var in edgeBytesInput
	var exp edgeDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.edge_bytes", in.EdgeBytes != nil); err != nil {
		return err
	}
	e, err := tgk.Decode(*in.EdgeBytes)
	if exp.Reject != nil {
		if exp.Edge != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject)
	}
	if err := need("expect.edge", exp.Edge != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	if got := edgeToVec(e); !equalEdgeVec(got, *exp.Edge) {
		return fmt.Errorf("decoded %+v, want %+v", got, *exp.Edge)
	}
	again, err := tgk.Append(nil, e)
	if err != nil {
		return err
	}
	return eqBytes("re-encoding", again, *in.EdgeBytes)
}

func genTGKEdge() ([]Vector, error) {
	var l vectorList
	r := func(s string) asl.Reference { return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(s))) }
	blake := asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("b")))
	unknown, _ := asl.DecodeReference([]byte{0x77, 0x77, 1})
	cases := []struct {
		name, desc string
		e          tgk.Edge
	}{
		{"minimal", "one program to one output",
			tgk.Edge{Type: tgk.EdgeTypePELRun, From: []tgk.Endpoint{{Role: tgk.RoleProgram, Ref: r("p")}}, To: []tgk.Endpoint{{Role: tgk.RoleOutput, Ref: r("o")}}}},
		{"run", "a full PEL_RUN edge: program, two inputs, params; two outputs, result, trace",
			tgk.Edge{Type: tgk.EdgeTypePELRun,
				From: []tgk.Endpoint{{Role: tgk.RoleProgram, Ref: r("p")}, {Role: tgk.RoleInput, Ref: r("i0")}, {Role: tgk.RoleInput, Ref: r("i1")}, {Role: tgk.RoleParams, Ref: r("g")}},
				To:   []tgk.Endpoint{{Role: tgk.RoleOutput, Ref: r("o0")}, {Role: tgk.RoleOutput, Ref: r("o1")}, {Role: tgk.RoleResult, Ref: r("res")}, {Role: tgk.RoleTrace, Ref: r("tr")}}}},
		{"plan-effect", "a PLAN_EFFECT edge: request and two inputs; receipt and two outputs",
			tgk.Edge{Type: tgk.EdgeTypePlanEffect,
				From: []tgk.Endpoint{{Role: tgk.RoleRequest, Ref: r("req")}, {Role: tgk.RoleInput, Ref: r("i0")}, {Role: tgk.RoleInput, Ref: r("i1")}},
				To:   []tgk.Endpoint{{Role: tgk.RoleReceipt, Ref: r("rc")}, {Role: tgk.RoleOutput, Ref: r("o0")}, {Role: tgk.RoleOutput, Ref: r("o1")}}}},
		{"other-type-mixed-hashes", "an opaque edge type with BLAKE3 and unregistered-hash endpoints",
			tgk.Edge{Type: 0xfffffffe, From: []tgk.Endpoint{{Role: tgk.RoleInput, Ref: blake}}, To: []tgk.Endpoint{{Role: tgk.RoleOutput, Ref: unknown}}}},
	}
	for _, c := range cases {
		b, err := tgk.Append(nil, c.e)
		if err != nil {
			return nil, err
		}
		ev, bh := edgeToVec(c.e), Hex(b)
		l.add("tgk.edge.encode."+c.name, "encode: "+c.desc, specEdge, KindEdgeEncode, edgeInput{Edge: &ev},
			edgeEncodeExpect{EdgeBytes: &bh, Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagTGK1EdgeV1, b)).String()})
		l.add("tgk.edge.decode."+c.name, "decode and re-encode: "+c.desc, specEdge, KindEdgeDecode, edgeBytesInput{EdgeBytes: &bh}, edgeDecodeExpect{Edge: &ev})
	}
	full, _ := tgk.Append(nil, cases[0].e)
	for _, c := range []bytesCase{
		{"empty", "no bytes: edge_type truncated", nil},
		{"from-count-zero", "an empty from list", h("00000001 00000000")},
		{"from-count-past-end", "from count 2^32-1 with one byte following", h("00000001 ffffffff 01")},
		{"role-undefined", "an endpoint with role 0x09", cat(full[:8], h("09"), full[9:])},
		{"role-zero", "an endpoint with role 0x00", cat(full[:8], h("00"), full[9:])},
		{"ref-len-short", "an endpoint whose ref_len is 1", h("00000001 00000001 01 00000001 00")},
		{"ref-reserved-hash", "an endpoint reference with hash id 0x0000", h("00000001 00000001 01 00000002 0000")},
		{"to-missing", "no to list", full[:8+1+38]},
		{"to-count-zero", "an empty to list", cat(full[:8+1+38], h("00000000"))},
		{"truncated", "the edge without its last byte", full[:len(full)-1]},
		{"trailing-byte", "the edge followed by one byte", cat(full, h("00"))},
	} {
		_, err := tgk.Decode(c.in)
		if err == nil {
			return nil, fmt.Errorf("edge reject case %s accepted", c.name)
		}
		in := Hex(c.in)
		l.add("tgk.edge.reject."+c.name, "reject: "+c.desc, specEdge, KindEdgeDecode, edgeBytesInput{EdgeBytes: &in}, edgeDecodeExpect{Reject: RejectOf(err, "")})
	}
	return l.vs, l.err
}

type requestVec struct {
	SchemeRef  *string  `json:"scheme_ref"`
	ProgramRef string   `json:"program_ref"`
	InputRefs  []string `json:"input_refs"` // never null: no inputs is []
	ParamsRef  *string  `json:"params_ref"`
	MaxNodes   uint64   `json:"max_nodes"`
	MaxBytes   uint64   `json:"max_output_bytes"`
}

type requestKeyInput struct {
	Request *requestVec `json:"request"`
	HashID  uint16      `json:"hash_id"`
	Salt    *Hex        `json:"salt"`
}

type keyExpect struct {
	Key *Hex `json:"key"`
}

func (v requestVec) request() (surf.Request, error) {
	var req surf.Request
	var err error
	parse := func(s string) asl.Reference {
		if err != nil {
			return asl.Reference{}
		}
		var r asl.Reference
		r, err = asl.ParseReference(s)
		return r
	}
	if v.SchemeRef != nil {
		req.SchemeRef = parse(*v.SchemeRef)
	}
	req.ProgramRef = parse(v.ProgramRef)
	for _, s := range v.InputRefs {
		req.InputRefs = append(req.InputRefs, parse(s))
	}
	if v.ParamsRef != nil {
		req.ParamsRef, req.HasParams = parse(*v.ParamsRef), true
	}
	req.Limits = pel.Limits{MaxNodes: v.MaxNodes, MaxOutputBytes: v.MaxBytes}
	return req, err
}

func checkRequestKey(_ context.Context, v Vector) error {
	var in requestKeyInput
	var exp keyExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.request, input.request.input_refs, input.salt and expect.key", in.Request != nil && in.Request.InputRefs != nil && in.Salt != nil && exp.Key != nil); err != nil {
		return err
	}
	req, err := in.Request.request()
	if err != nil {
		return fmt.Errorf("bad vector: %v", err)
	}
	key := surf.RequestKey(req, asl.HashID(in.HashID), *in.Salt)
	return eqBytes("request key", key[:], *exp.Key)
}

type nodeKeyInput struct {
	Op      string         `json:"op"`
	Version uint32         `json:"version"`
	Params  *Hex           `json:"params"`
	Inputs  []artifactJSON `json:"inputs"`
	Global  *artifactJSON  `json:"global"`
	HashID  uint16         `json:"hash_id"`
	Salt    *Hex           `json:"salt"`
}

func checkNodeKey(_ context.Context, v Vector) error {
	var in nodeKeyInput
	var exp keyExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.params and expect.key", in.Params != nil && exp.Key != nil); err != nil {
		return err
	}
	inputs := make([]asl.Artifact, len(in.Inputs))
	for i, a := range in.Inputs {
		art, err := a.artifact()
		if err != nil {
			return fmt.Errorf("bad vector: %v", err)
		}
		inputs[i] = art
	}
	var global *asl.Artifact
	if in.Global != nil {
		g, err := in.Global.artifact()
		if err != nil {
			return fmt.Errorf("bad vector: %v", err)
		}
		global = &g
	}
	var salt []byte
	if in.Salt != nil {
		salt = *in.Salt
	}
	key := surf.NodeKey(asl.HashID(in.HashID), pel.OperationID{Name: in.Op, Version: in.Version}, *in.Params, inputs, global, salt)
	return eqBytes("node key", key[:], *exp.Key)
}

func genSurfKeys() ([]Vector, error) {
	var l vectorList
	r := func(s string) string { return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(s))).String() }
	str := func(s string) *string { return &s }
	scheme := pel.SchemeRefDAG1.String()
	reqs := []struct {
		name, desc string
		req        requestVec
		hash       asl.HashID
		salt       string
	}{
		{"minimal", "a program with no inputs, SHA-256, no bounds, empty salt", requestVec{ProgramRef: r("p")}, asl.HashSHA256, ""},
		{"explicit-scheme", "the same with scheme_ref = SchemeRef_DAG_1 given explicitly (same key)", requestVec{SchemeRef: &scheme, ProgramRef: r("p")}, asl.HashSHA256, ""},
		{"inputs-params", "two inputs and params", requestVec{ProgramRef: r("p"), InputRefs: []string{r("a"), r("b")}, ParamsRef: str(r("g"))}, asl.HashSHA256, ""},
		{"inputs-swapped", "the same inputs in the other order", requestVec{ProgramRef: r("p"), InputRefs: []string{r("b"), r("a")}, ParamsRef: str(r("g"))}, asl.HashSHA256, ""},
		{"blake3", "stored under BLAKE3-256", requestVec{ProgramRef: r("p")}, asl.HashBLAKE3, ""},
		{"limits", "with max_nodes 100 and max_output_bytes 1 MiB", requestVec{ProgramRef: r("p"), MaxNodes: 100, MaxBytes: 1 << 20}, asl.HashSHA256, ""},
		{"salted", "with salt \"2026-11\"", requestVec{ProgramRef: r("p")}, asl.HashSHA256, "2026-11"},
		{"other-scheme", "under another scheme reference", requestVec{SchemeRef: str(r("scheme")), ProgramRef: r("p")}, asl.HashSHA256, ""},
	}
	for _, c := range reqs {
		req, err := c.req.request()
		if err != nil {
			return nil, err
		}
		key := surf.RequestKey(req, c.hash, []byte(c.salt))
		salt, k := Hex(c.salt), Hex(key[:])
		rv := c.req
		if rv.InputRefs == nil {
			rv.InputRefs = []string{}
		}
		l.add("surf.keys.request."+c.name, "request key: "+c.desc, specRequestKey, KindRequestKey,
			requestKeyInput{Request: &rv, HashID: uint16(c.hash), Salt: &salt}, keyExpect{Key: &k})
	}
	hello := asl.Untagged([]byte("hello"))
	tagged := asl.Tagged(7, []byte("x"))
	nodes := []struct {
		name, desc string
		op         pel.OperationID
		params     []byte
		inputs     []asl.Artifact
		global     *asl.Artifact
		hash       asl.HashID
		salt       string
	}{
		{"concat", "pel.bytes.concat v1 of two inputs", pel.OperationID{Name: "pel.bytes.concat", Version: 1}, nil, []asl.Artifact{hello, tagged}, nil, asl.HashSHA256, ""},
		{"concat-swapped", "the same inputs in the other order", pel.OperationID{Name: "pel.bytes.concat", Version: 1}, nil, []asl.Artifact{tagged, hello}, nil, asl.HashSHA256, ""},
		{"concat-salted", "the first concat under salt \"2026-11\"", pel.OperationID{Name: "pel.bytes.concat", Version: 1}, nil, []asl.Artifact{hello, tagged}, nil, asl.HashSHA256, "2026-11"},
		{"slice-params", "pel.bytes.slice v1 with params offset 1 length 3", pel.OperationID{Name: "pel.bytes.slice", Version: 1}, h("0000000000000001 0000000000000003"), []asl.Artifact{hello}, nil, asl.HashSHA256, ""},
		{"params-global", "pel.bytes.params v1 reading a global params artifact", pel.OperationID{Name: "pel.bytes.params", Version: 1}, nil, nil, &tagged, asl.HashSHA256, ""},
		{"no-inputs-blake3", "a nullary operation, references under BLAKE3-256", pel.OperationID{Name: "pel.bytes.const", Version: 1}, h("00 00000002 6869"), nil, nil, asl.HashBLAKE3, ""},
	}
	for _, c := range nodes {
		key := surf.NodeKey(c.hash, c.op, c.params, c.inputs, c.global, []byte(c.salt))
		salt := Hex(c.salt)
		in := nodeKeyInput{Op: c.op.Name, Version: c.op.Version, HashID: uint16(c.hash), Inputs: []artifactJSON{}, Salt: &salt}
		p := Hex(c.params)
		in.Params = &p
		for _, a := range c.inputs {
			in.Inputs = append(in.Inputs, artifactToJSON(a))
		}
		if c.global != nil {
			g := artifactToJSON(*c.global)
			in.Global = &g
		}
		k := Hex(key[:])
		l.add("surf.keys.node."+c.name, "node key: "+c.desc, specNodeKey, KindNodeKey, in, keyExpect{Key: &k})
	}
	return l.vs, l.err
}
