package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
	"github.com/amduat/amduat/trace"
)

// CaseGenerator produces differential cases (SPECS.md §21.6): valid and
// mutated inputs of every vector kind, whose expected answers Solve
// computes with this implementation. The sequence is a pure function of
// the seed: case n of seed s is always the same input, with the id
// "<category>.gen.<kind>.<s>.<n>", followed by ".blake3" when answering it
// needs BLAKE3-256 (so an expected-failures file can name them with the
// pattern "*.blake3").
type CaseGenerator struct {
	seed uint64
	rng  *rand.Rand
	n    int
	// blake is set by the helpers when the answer of the case being built
	// needs BLAKE3 hashing.
	blake bool
}

// NewCaseGenerator starts the sequence of seed.
func NewCaseGenerator(seed uint64) *CaseGenerator {
	return &CaseGenerator{seed: seed, rng: rand.New(rand.NewPCG(seed, 0x616d64756174))}
}

type caseGen struct {
	category, kind string
	gen            func(g *CaseGenerator) (any, error)
}

// errRetry: the random input is not a valid request (an encoder refuses
// it); the generator draws another.
var errRetry = errors.New("retry")

// genTable is visited round-robin, so every kind gets its share.
var genTable = []caseGen{
	{"asl.artifact", KindArtifactEncode, func(g *CaseGenerator) (any, error) { return artifactToJSON(g.artifact()), nil }},
	{"asl.artifact", KindArtifactDecode, func(g *CaseGenerator) (any, error) {
		return artifactBytesJSON{ArtifactBytes: ptr(Hex(g.maybeMutate(asl.EncodeArtifact(g.artifact()))))}, nil
	}},
	{"asl.reference", KindReferenceDecode, func(g *CaseGenerator) (any, error) {
		return referenceBytesJSON{ReferenceBytes: ptr(Hex(g.maybeMutate(g.ref().Bytes())))}, nil
	}},
	{"asl.derive", KindReferenceDerive, func(g *CaseGenerator) (any, error) {
		a, id := g.artifact(), g.hash()
		j := artifactToJSON(a)
		return deriveInput{HashID: ptr(uint16(id)), TypeTag: j.TypeTag, Bytes: j.Bytes}, nil
	}},
	{"asl.text", KindReferenceToText, func(g *CaseGenerator) (any, error) {
		return referenceBytesJSON{ReferenceBytes: ptr(Hex(g.ref().Bytes()))}, nil
	}},
	{"asl.text", KindReferenceFromText, func(g *CaseGenerator) (any, error) {
		s := g.ref().String()
		if g.chance(2) {
			s = g.mutateText(s)
		}
		return textJSON{Text: &s}, nil
	}},
	{"asl.encodedref", KindEncodedRefEncode, func(g *CaseGenerator) (any, error) {
		return referenceBytesJSON{ReferenceBytes: ptr(Hex(g.ref().Bytes()))}, nil
	}},
	{"asl.encodedref", KindEncodedRefDecode, func(g *CaseGenerator) (any, error) {
		return encodedRefJSON{EncodedRef: ptr(Hex(g.maybeMutate(asl.AppendEncodedRef(nil, g.ref()))))}, nil
	}},
	{"asl.encodedref", KindOptionalEncodedRefEncode, func(g *CaseGenerator) (any, error) {
		if g.chance(4) {
			return optionalRefJSON{}, nil
		}
		return optionalRefJSON{ReferenceBytes: ptr(Hex(g.ref().Bytes()))}, nil
	}},
	{"asl.encodedref", KindOptionalEncodedRefDecode, func(g *CaseGenerator) (any, error) {
		present := !g.chance(4)
		return optionalEncodedRefJSON{OptionalEncodedRef: ptr(Hex(g.maybeMutate(asl.AppendOptionalEncodedRef(nil, g.ref(), present))))}, nil
	}},
	{"bundle", KindBundleEncode, func(g *CaseGenerator) (any, error) {
		id := g.hash()
		in := bundleEncodeInput{HashID: ptr(uint16(id)), Entries: []artifactJSON{}, Roots: []int{}}
		n := g.rng.IntN(5)
		for range n {
			in.Entries = append(in.Entries, artifactToJSON(g.artifact()))
		}
		for i := range n {
			if g.chance(3) {
				in.Roots = append(in.Roots, i)
			}
		}
		return in, nil
	}},
	{"bundle", KindBundleDecode, func(g *CaseGenerator) (any, error) {
		id := g.hash()
		var arts []asl.Artifact
		var roots []int
		for i := range g.rng.IntN(4) {
			arts = append(arts, g.artifact())
			if g.chance(2) {
				roots = append(roots, i)
			}
		}
		b, err := encodeBundle(id, arts, roots)
		if err != nil {
			return nil, err
		}
		return bundleJSON{Bundle: ptr(Hex(g.maybeMutate(b)))}, nil
	}},
	{"pel.program", KindProgramEncode, func(g *CaseGenerator) (any, error) {
		pv := programToVec(g.program(true))
		return programInput{Program: &pv}, nil
	}},
	{"pel.program", KindProgramDecode, func(g *CaseGenerator) (any, error) {
		b, err := pel.EncodeProgram(g.program(true))
		if err != nil {
			return nil, errRetry
		}
		return programBytesInput{ProgramBytes: ptr(Hex(g.maybeMutate(b)))}, nil
	}},
	{"pel.order", KindCanonicalOrder, func(g *CaseGenerator) (any, error) {
		pv := programToVec(g.program(false))
		return programInput{Program: &pv}, nil
	}},
	{"pel.exec", KindExecDAG, func(g *CaseGenerator) (any, error) {
		p := g.program(true)
		art, err := pel.ProgramArtifact(p)
		if err != nil {
			return nil, errRetry
		}
		if g.chance(10) {
			art.Bytes = g.mutate(art.Bytes)
		}
		in := execInput{Program: ptr(artifactToJSON(art)), Inputs: []artifactJSON{}}
		for range g.rng.IntN(4) {
			in.Inputs = append(in.Inputs, artifactToJSON(g.artifact()))
		}
		if g.chance(3) {
			in.Params = ptr(artifactToJSON(g.artifact()))
		}
		if g.chance(6) {
			in.Limits = &limitsVec{MaxNodes: uint64(g.rng.IntN(6)), MaxOutputBytes: uint64(g.rng.IntN(64))}
		}
		return in, nil
	}},
	{"pel.value", KindResultValueEncode, func(g *CaseGenerator) (any, error) {
		vv := valueToVec(g.value())
		return valueInput{Value: &vv}, nil
	}},
	{"pel.value", KindResultValueDecode, func(g *CaseGenerator) (any, error) {
		b, err := pel.EncodeResultValue(g.value())
		if err != nil {
			return nil, errRetry
		}
		return valueBytesJSON{ValueBytes: ptr(Hex(g.maybeMutate(b)))}, nil
	}},
	{"pel.descriptor", KindDescriptorEncode, func(g *CaseGenerator) (any, error) {
		dv := descriptorToVec(g.descriptor())
		return descriptorInput{Descriptor: &dv}, nil
	}},
	{"pel.descriptor", KindDescriptorDecode, func(g *CaseGenerator) (any, error) {
		return descriptorBytesInput{DescriptorBytes: ptr(Hex(g.maybeMutate(pel.EncodeDescriptor(g.descriptor()))))}, nil
	}},
	{"trace.codec", KindTraceEncode, func(g *CaseGenerator) (any, error) {
		tv := traceToVec(g.trace())
		return traceInput{Trace: &tv}, nil
	}},
	{"trace.codec", KindTraceDecode, func(g *CaseGenerator) (any, error) {
		b, err := trace.Encode(g.trace())
		if err != nil {
			return nil, errRetry
		}
		return traceBytesInput{TraceBytes: ptr(Hex(g.maybeMutate(b)))}, nil
	}},
	{"surf.result", KindResultEncode, func(g *CaseGenerator) (any, error) {
		rv := resultToVec(g.result())
		return resultInput{Result: &rv}, nil
	}},
	{"surf.result", KindResultDecode, func(g *CaseGenerator) (any, error) {
		b, err := surf.AppendResult(nil, g.result())
		if err != nil {
			return nil, errRetry
		}
		return resultBytesInput{ResultBytes: ptr(Hex(g.maybeMutate(b)))}, nil
	}},
	{"surf.run", KindSurfaceRun, func(g *CaseGenerator) (any, error) { return g.surfaceRun() }},
	{"surf.keys", KindRequestKey, func(g *CaseGenerator) (any, error) {
		rv := requestVec{ProgramRef: g.ref().String(), InputRefs: []string{}}
		if g.chance(3) {
			rv.SchemeRef = ptr(g.ref().String())
		}
		for range g.rng.IntN(3) {
			rv.InputRefs = append(rv.InputRefs, g.ref().String())
		}
		if g.chance(2) {
			rv.ParamsRef = ptr(g.ref().String())
		}
		if g.chance(3) {
			rv.MaxNodes, rv.MaxBytes = g.rng.Uint64N(100), g.rng.Uint64()
		}
		id := g.hash()
		return requestKeyInput{Request: &rv, HashID: uint16(id), Salt: ptr(Hex(g.bytes(16)))}, nil
	}},
	{"surf.keys", KindNodeKey, func(g *CaseGenerator) (any, error) {
		op := g.opID()
		in := nodeKeyInput{Op: op.Name, Version: op.Version, Params: ptr(Hex(g.bytes(16))), Inputs: []artifactJSON{}, HashID: uint16(g.hash())}
		for range g.rng.IntN(3) {
			in.Inputs = append(in.Inputs, artifactToJSON(g.artifact()))
		}
		if g.chance(2) {
			in.Global = ptr(artifactToJSON(g.artifact()))
		}
		if g.chance(2) {
			in.Salt = ptr(Hex(g.bytes(16)))
		}
		return in, nil
	}},
	{"tgk.edge", KindEdgeEncode, func(g *CaseGenerator) (any, error) {
		ev := edgeToVec(g.edge())
		return edgeInput{Edge: &ev}, nil
	}},
	{"tgk.edge", KindEdgeDecode, func(g *CaseGenerator) (any, error) {
		b, err := tgk.Append(nil, g.edge())
		if err != nil {
			return nil, errRetry
		}
		return edgeBytesInput{EdgeBytes: ptr(Hex(g.maybeMutate(b)))}, nil
	}},
}

// GeneratedKinds lists the kinds the generator produces, in table order.
func GeneratedKinds() []string {
	var out []string
	for _, c := range genTable {
		out = append(out, c.kind)
	}
	return out
}

// Next returns the next case of the sequence.
func (g *CaseGenerator) Next() (Case, error) {
	n := g.n
	g.n++
	cg := genTable[n%len(genTable)]
	for attempt := 0; attempt < 1000; attempt++ {
		g.blake = false
		in, err := cg.gen(g)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return Case{}, fmt.Errorf("%s: %w", cg.kind, err)
		}
		input, err := MarshalJSON(in)
		if err != nil {
			return Case{}, err
		}
		out, err := Solve(context.Background(), cg.kind, input)
		if err != nil {
			if strings.Contains(err.Error(), "bad input") {
				continue // an input the encoder refuses: draw again
			}
			return Case{}, fmt.Errorf("%s: solving %s: %w", cg.kind, input, err)
		}
		expect, err := MarshalJSON(out)
		if err != nil {
			return Case{}, err
		}
		id := fmt.Sprintf("%s.gen.%s.%d.%d", cg.category, cg.kind, g.seed, n)
		if g.blake {
			id += ".blake3"
		}
		return Case{Category: cg.category, Vector: Vector{ID: id, Kind: cg.kind, Spec: "§21.6",
			Description: fmt.Sprintf("generated case %d of seed %d", n, g.seed), Input: input, Expect: expect}}, nil
	}
	return Case{}, fmt.Errorf("%s: no valid input in 1000 draws", cg.kind)
}

// Random building blocks.

func (g *CaseGenerator) chance(n int) bool { return g.rng.IntN(n) == 0 }

func (g *CaseGenerator) bytes(max int) []byte {
	b := make([]byte, g.rng.IntN(max+1))
	for i := range b {
		b[i] = byte(g.rng.UintN(256))
	}
	return b
}

// payload draws a size class (empty, one byte, small, medium, a few KiB,
// rarely 64 KiB) and fills it.
func (g *CaseGenerator) payload() []byte {
	var n int
	switch r := g.rng.IntN(100); {
	case r < 10:
		n = 0
	case r < 20:
		n = 1
	case r < 70:
		n = 2 + g.rng.IntN(31)
	case r < 92:
		n = 33 + g.rng.IntN(480)
	case r < 99:
		n = 513 + g.rng.IntN(4096)
	default:
		n = 65536
	}
	b := make([]byte, n)
	if g.chance(4) {
		for i := range b {
			b[i] = "abcdefgh"[g.rng.IntN(8)]
		}
		return b
	}
	for i := range b {
		b[i] = byte(g.rng.UintN(256))
	}
	return b
}

var knownTags = []asl.TypeTag{0, asl.TagPELProgramDAG1, asl.TagPELTraceDAG1, asl.TagPEL1Result1, pel.TagSchemeDescriptor, asl.TagTGK1EdgeV1, 0xffffffff}

func (g *CaseGenerator) artifact() asl.Artifact {
	b := g.payload()
	switch r := g.rng.IntN(10); {
	case r < 4:
		return asl.Untagged(b)
	case r < 8:
		return asl.Tagged(knownTags[g.rng.IntN(len(knownTags))], b)
	default:
		return asl.Tagged(asl.TypeTag(g.rng.Uint32()), b)
	}
}

// hash draws the hash of a derivation: SHA-256 mostly, BLAKE3 a third of
// the time (marking the case).
func (g *CaseGenerator) hash() asl.HashID {
	if g.chance(3) {
		g.blake = true
		return asl.HashBLAKE3
	}
	return asl.HashSHA256
}

// ref draws a reference: SHA-256, BLAKE3 (no hashing needed by the
// testee: the digest is data here) or an unregistered hash id with a
// digest of any length.
func (g *CaseGenerator) ref() asl.Reference {
	switch r := g.rng.IntN(10); {
	case r < 6:
		return asl.MustDerive(asl.HashSHA256, asl.Untagged(g.bytes(8)))
	case r < 8:
		return asl.MustDerive(asl.HashBLAKE3, asl.Untagged(g.bytes(8)))
	default:
		id := uint16(3 + g.rng.IntN(0xfffc))
		d := g.bytes(64)
		if len(d) == 0 {
			d = []byte{0}
		}
		b := append([]byte{byte(id >> 8), byte(id)}, d...)
		ref, err := asl.DecodeReference(b)
		if err != nil {
			return asl.MustDerive(asl.HashSHA256, asl.Untagged(nil))
		}
		return ref
	}
}

func (g *CaseGenerator) maybeMutate(b []byte) []byte {
	if g.chance(2) {
		return b
	}
	return g.mutate(b)
}

// mutate breaks b in one of the ways decoders must catch: a changed byte,
// truncation, extra bytes, a byte inserted or removed, a length set to
// its maximum.
func (g *CaseGenerator) mutate(b []byte) []byte {
	out := append([]byte(nil), b...)
	switch g.rng.IntN(6) {
	case 0:
		if len(out) > 0 {
			out[g.rng.IntN(len(out))] ^= byte(1 + g.rng.IntN(255))
		}
	case 1:
		if len(out) > 0 {
			out = out[:g.rng.IntN(len(out))]
		}
	case 2:
		out = append(out, g.bytes(4)...)
		out = append(out, 0)
	case 3:
		i := g.rng.IntN(len(out) + 1)
		out = append(out[:i], append([]byte{byte(g.rng.UintN(256))}, out[i:]...)...)
	case 4:
		if len(out) > 0 {
			i := g.rng.IntN(len(out))
			out = append(out[:i], out[i+1:]...)
		}
	case 5:
		if len(out) >= 4 {
			i := g.rng.IntN(len(out) - 3)
			copy(out[i:], []byte{0xff, 0xff, 0xff, 0xff})
		}
	}
	return out
}

func (g *CaseGenerator) mutateText(s string) string {
	if s == "" {
		return "x"
	}
	i := g.rng.IntN(len(s))
	switch g.rng.IntN(5) {
	case 0:
		return s[:i]
	case 1:
		return s[:i] + string("0123456789abcdefABCDEFgx:-_ "[g.rng.IntN(28)]) + s[i+1:]
	case 2:
		return strings.ToUpper(s)
	case 3:
		return s + "0"
	default:
		return s[:i] + s[i:]
	}
}

func (g *CaseGenerator) opID() opreg.OperationID {
	ops := []opreg.OperationID{opreg.OpConst, opreg.OpConcat, opreg.OpSlice, opreg.OpHash, opreg.OpParams}
	if g.chance(8) {
		names := []string{"pel.bytes.nope", "x", "pel.bytes.const"}
		return opreg.OperationID{Name: names[g.rng.IntN(len(names))], Version: uint32(g.rng.IntN(3))}
	}
	return ops[g.rng.IntN(len(ops))]
}

// program draws a DAG over the kernel operations, with params valid for
// their operation most of the time; when broken is true, one rule of §4,
// §12.3 may be broken (a dangling input, a duplicate id, a cycle, a bad
// root).
func (g *CaseGenerator) program(broken bool) pel.Program {
	n := g.rng.IntN(6)
	var p pel.Program
	ids := make([]pel.NodeID, 0, n)
	for i := range n {
		id := pel.NodeID(1 + i*int(1+g.rng.IntN(3)))
		if g.chance(3) {
			id = pel.NodeID(g.rng.IntN(20))
		}
		op := g.opID()
		node := pel.Node{ID: id, Op: op, Params: []byte{}}
		switch op {
		case opreg.OpConst:
			node.Params = constParams(string(g.bytes(12)))
		case opreg.OpSlice:
			node.Params = sliceParams(uint64(g.rng.IntN(8)), uint64(g.rng.IntN(12)))
		}
		if g.chance(12) {
			node.Params = g.bytes(10)
		}
		nin := 0
		switch op {
		case opreg.OpConcat:
			nin = 1 + g.rng.IntN(3)
		case opreg.OpSlice, opreg.OpHash:
			nin = 1
		}
		if g.chance(12) {
			nin = g.rng.IntN(3)
		}
		for range nin {
			if len(ids) > 0 && !g.chance(3) {
				node.Inputs = append(node.Inputs, pel.FromNode(ids[g.rng.IntN(len(ids))], 0))
			} else {
				node.Inputs = append(node.Inputs, pel.External(uint32(g.rng.IntN(4))))
			}
		}
		if broken && g.chance(15) && len(node.Inputs) > 0 {
			node.Inputs[0] = pel.FromNode(pel.NodeID(g.rng.IntN(30)), uint32(g.rng.IntN(2)))
		}
		ids = append(ids, id)
		p.Nodes = append(p.Nodes, node)
	}
	for _, id := range ids {
		if g.chance(2) {
			p.Roots = append(p.Roots, pel.RootRef{NodeID: id})
		}
	}
	if len(ids) > 0 && (len(p.Roots) == 0 || g.chance(10)) {
		out := uint32(0)
		if broken && g.chance(6) {
			out = 1
		}
		p.Roots = append(p.Roots, pel.RootRef{NodeID: ids[g.rng.IntN(len(ids))], OutputIndex: out})
	}
	return p
}

func (g *CaseGenerator) diags() []pel.DiagnosticEntry {
	var ds []pel.DiagnosticEntry
	for range g.rng.IntN(3) {
		msg := []byte("diagnostic " + fmt.Sprint(g.rng.IntN(1000)))
		if g.chance(5) {
			msg = g.bytes(8)
		}
		ds = append(ds, pel.DiagnosticEntry{Code: g.rng.Uint32N(0x10000), Message: msg})
	}
	return ds
}

func (g *CaseGenerator) value() pel.ExecutionResultValue {
	st := pel.ExecutionStatus(g.rng.IntN(5))
	v := pel.ExecutionResultValue{PEL1Version: 1, Status: st, SchemeRef: pel.SchemeRefDAG1,
		Summary: pel.ExecutionErrorSummary{Kind: pel.ExecutionErrorKind(st), StatusCode: uint32(st)}, Diagnostics: g.diags()}
	if st == pel.StatusRuntimeFailed {
		v.Summary.StatusCode = g.rng.Uint32N(1000)
	}
	if g.chance(4) {
		v.SchemeRef = g.ref()
	}
	if g.chance(8) {
		v.Summary.Kind = pel.ExecutionErrorKind(g.rng.IntN(6))
	}
	if g.chance(10) {
		v.PEL1Version = uint16(g.rng.IntN(3))
	}
	return v
}

func (g *CaseGenerator) descriptor() pel.Descriptor {
	d := pel.DescriptorDAG1
	if g.chance(2) {
		d.SchemeID = string(g.bytes(10))
	}
	if g.chance(3) {
		d.GlobalParams = uint8(g.rng.IntN(3))
	}
	if g.chance(3) {
		d.PEL1Version = uint16(g.rng.IntN(3))
	}
	if g.chance(4) {
		d.OpRegistry = "OPREG/" + fmt.Sprint(g.rng.IntN(100))
	}
	return d
}

func (g *CaseGenerator) refs(max int) []asl.Reference {
	var out []asl.Reference
	for range g.rng.IntN(max + 1) {
		out = append(out, g.ref())
	}
	return out
}

func (g *CaseGenerator) trace() trace.Trace {
	st := pel.ExecutionStatus(g.rng.IntN(5))
	t := trace.Trace{SchemeRef: pel.SchemeRefDAG1, ProgramRef: g.ref(), InputRefs: g.refs(3), ExecResultRef: g.ref(),
		Status: st, StatusCode: uint32(st)}
	if g.chance(2) {
		t.ParamsRef, t.HasParams = g.ref(), true
	}
	for i := range g.rng.IntN(4) {
		nst := pel.ExecutionStatus(g.rng.IntN(5))
		t.Nodes = append(t.Nodes, trace.NodeRecord{NodeID: pel.NodeID(i + 1), Op: g.opID(), Status: nst, StatusCode: uint32(nst),
			OutputRefs: g.refs(2), Diagnostics: g.diags()})
	}
	return t
}

func (g *CaseGenerator) result() surf.Result {
	r := surf.Result{ProgramRef: g.ref(), InputRefs: g.refs(3), Value: g.value(), OutputRefs: g.refs(3)}
	if g.chance(2) {
		r.ParamsRef, r.HasParams = g.ref(), true
	}
	if g.chance(4) {
		r.Limits = pel.Limits{MaxNodes: g.rng.Uint64N(10), MaxOutputBytes: g.rng.Uint64()}
	}
	if g.chance(4) {
		r.HasStoreFailure = true
		r.StoreFailure = surf.StoreFailure{Phase: surf.Phase(1 + g.rng.IntN(3)), InputIndex: g.rng.Uint32N(4), Ref: g.ref(),
			Error: surf.StoreError(1 + g.rng.IntN(3))}
	}
	return r
}

func (g *CaseGenerator) edge() tgk.Edge {
	eps := func() []tgk.Endpoint {
		var out []tgk.Endpoint
		for range 1 + g.rng.IntN(3) {
			out = append(out, tgk.Endpoint{Role: tgk.Role(1 + g.rng.IntN(6)), Ref: g.ref()})
		}
		return out
	}
	typ := tgk.EdgeTypePELRun
	if g.chance(3) {
		typ = tgk.EdgeType(g.rng.Uint32())
	}
	return tgk.Edge{Type: typ, From: eps(), To: eps()}
}

// surfaceRun draws a store holding a program, some inputs and params, a
// request naming them (or references the store lacks), and sometimes
// damage to one stored artifact.
func (g *CaseGenerator) surfaceRun() (any, error) {
	id := g.hash()
	p := g.program(true)
	prog, err := pel.ProgramArtifact(p)
	if err != nil {
		return nil, errRetry
	}
	if g.chance(10) {
		prog.Bytes = g.mutate(prog.Bytes)
	}
	store := []asl.Artifact{prog}
	var inputs []asl.Artifact
	for range g.rng.IntN(4) {
		a := g.artifact()
		inputs = append(inputs, a)
		if !g.chance(8) {
			store = append(store, a)
		}
	}
	derive := func(a asl.Artifact) string { return asl.MustDerive(id, a).String() }
	req := &surfRequestVec{ProgramRef: derive(prog), InputRefs: []string{}}
	if g.chance(12) {
		req.ProgramRef = derive(g.artifact())
	}
	for _, a := range inputs {
		req.InputRefs = append(req.InputRefs, derive(a))
	}
	if g.chance(3) {
		params := g.artifact()
		store = append(store, params)
		req.ParamsRef = ptr(derive(params))
	}
	if g.chance(8) {
		req.Limits = &limitsVec{MaxNodes: uint64(g.rng.IntN(5)), MaxOutputBytes: uint64(g.rng.IntN(64))}
	}
	in := surfRunInput{HashID: ptr(uint16(id)), Store: []artifactJSON{}, Damaged: []damageVec{}, Request: req}
	for _, a := range store {
		in.Store = append(in.Store, artifactToJSON(a))
	}
	if g.chance(8) {
		victim := store[g.rng.IntN(len(store))]
		in.Damaged = append(in.Damaged, damageVec{Ref: derive(victim), StoredBytes: Hex(g.mutate(append(victim.Bytes, 'x')))})
	}
	return in, nil
}
