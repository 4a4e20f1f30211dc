package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
	"github.com/amduat/amduat/trace"
)

// A Solver answers one request of the testee protocol (SPECS.md §21): from
// a vector's input it computes the expect member this implementation
// produces. It is what the Go testee runs, and what the generator of
// differential cases asks for every expected answer. An error means the
// input itself is malformed (a bad request), never that the input is
// rejected: a rejection is an answer ({"reject":...}).
type Solver func(ctx context.Context, input json.RawMessage) (any, error)

var solvers = map[string]Solver{}

func registerSolver(kind string, s Solver) {
	if _, dup := solvers[kind]; dup {
		panic("conformance: solver registered twice: " + kind)
	}
	solvers[kind] = s
}

// Solve computes this implementation's answer to a request of kind.
func Solve(ctx context.Context, kind string, input json.RawMessage) (answer any, err error) {
	s, ok := solvers[kind]
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("solver for %s panicked: %v", kind, p)
		}
	}()
	return s(ctx, input)
}

// SolverKinds lists the kinds Solve answers, sorted.
func SolverKinds() []string {
	out := make([]string, 0, len(solvers))
	for k := range solvers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// solve1 adapts a typed function to a Solver: the input is decoded strictly.
func solve1[I any](f func(ctx context.Context, in I) (any, error)) Solver {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in I
		if err := decodeStrict(raw, &in); err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		return f(ctx, in)
	}
}

func needIn(name string, ok bool) error {
	if !ok {
		return fmt.Errorf("bad input: %s missing", name)
	}
	return nil
}

func init() {
	registerSolver(KindArtifactEncode, solve1(func(_ context.Context, in artifactJSON) (any, error) {
		a, err := in.artifact()
		if err != nil {
			return nil, err
		}
		return artifactBytesJSON{ArtifactBytes: ptr(Hex(asl.EncodeArtifact(a)))}, nil
	}))
	registerSolver(KindArtifactDecode, solve1(func(_ context.Context, in artifactBytesJSON) (any, error) {
		if err := needIn("artifact_bytes", in.ArtifactBytes != nil); err != nil {
			return nil, err
		}
		a, err := asl.DecodeArtifact(*in.ArtifactBytes)
		if err != nil {
			return rejectExpect{RejectOf(err, "")}, nil
		}
		j := artifactToJSON(a)
		return artifactDecodeExpect{TypeTag: j.TypeTag, Bytes: j.Bytes}, nil
	}))
	registerSolver(KindReferenceDecode, solve1(func(_ context.Context, in referenceBytesJSON) (any, error) {
		if err := needIn("reference_bytes", in.ReferenceBytes != nil); err != nil {
			return nil, err
		}
		ref, err := asl.DecodeReference(*in.ReferenceBytes)
		if err != nil {
			return rejectExpect{RejectOf(err, "", ClassIntegrity)}, nil
		}
		return referenceDecodeExpect{HashID: ptr(uint16(ref.HashID())), Digest: ptr(Hex(ref.Digest())), Known: ptr(ref.Known())}, nil
	}))
	registerSolver(KindReferenceDerive, solve1(func(_ context.Context, in deriveInput) (any, error) {
		if err := needIn("hash_id", in.HashID != nil); err != nil {
			return nil, err
		}
		a, err := artifactJSON{TypeTag: in.TypeTag, Bytes: in.Bytes}.artifact()
		if err != nil {
			return nil, err
		}
		ref, err := asl.Derive(asl.HashID(*in.HashID), a)
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		return deriveExpect{ArtifactBytes: ptr(Hex(asl.EncodeArtifact(a))), Reference: ref.String()}, nil
	}))
	registerSolver(KindReferenceToText, solve1(func(_ context.Context, in referenceBytesJSON) (any, error) {
		if err := needIn("reference_bytes", in.ReferenceBytes != nil); err != nil {
			return nil, err
		}
		ref, err := asl.DecodeReference(*in.ReferenceBytes)
		if err != nil {
			return nil, fmt.Errorf("bad input: reference_bytes: %w", err)
		}
		return textJSON{Text: ptr(ref.String())}, nil
	}))
	registerSolver(KindReferenceFromText, solve1(func(_ context.Context, in textJSON) (any, error) {
		if err := needIn("text", in.Text != nil); err != nil {
			return nil, err
		}
		ref, err := asl.ParseReference(*in.Text)
		if err != nil {
			return rejectExpect{RejectOf(err, "text", ClassIntegrity)}, nil
		}
		return fromTextExpect{ReferenceBytes: ptr(Hex(ref.Bytes()))}, nil
	}))
	registerSolver(KindEncodedRefEncode, solve1(func(_ context.Context, in referenceBytesJSON) (any, error) {
		if err := needIn("reference_bytes", in.ReferenceBytes != nil); err != nil {
			return nil, err
		}
		ref, err := asl.DecodeReference(*in.ReferenceBytes)
		if err != nil {
			return nil, fmt.Errorf("bad input: reference_bytes: %w", err)
		}
		return encodedRefJSON{EncodedRef: ptr(Hex(asl.AppendEncodedRef(nil, ref)))}, nil
	}))
	registerSolver(KindEncodedRefDecode, solve1(func(_ context.Context, in encodedRefJSON) (any, error) {
		if err := needIn("encoded_ref", in.EncodedRef != nil); err != nil {
			return nil, err
		}
		ref, err := asl.DecodeEncodedRef(*in.EncodedRef)
		if err != nil {
			return rejectExpect{RejectOf(err, "")}, nil
		}
		return encodedRefDecodeExpect{ReferenceBytes: ptr(Hex(ref.Bytes()))}, nil
	}))
	registerSolver(KindOptionalEncodedRefEncode, solve1(func(_ context.Context, in optionalRefJSON) (any, error) {
		var ref asl.Reference
		present := in.ReferenceBytes != nil
		if present {
			var err error
			if ref, err = asl.DecodeReference(*in.ReferenceBytes); err != nil {
				return nil, fmt.Errorf("bad input: reference_bytes: %w", err)
			}
		}
		return optionalEncodedRefJSON{OptionalEncodedRef: ptr(Hex(asl.AppendOptionalEncodedRef(nil, ref, present)))}, nil
	}))
	registerSolver(KindOptionalEncodedRefDecode, solve1(func(_ context.Context, in optionalEncodedRefJSON) (any, error) {
		if err := needIn("optional_encoded_ref", in.OptionalEncodedRef != nil); err != nil {
			return nil, err
		}
		ref, present, err := asl.DecodeOptionalEncodedRef(*in.OptionalEncodedRef)
		if err != nil {
			return rejectExpect{RejectOf(err, "")}, nil
		}
		out := optionalDecodeExpect{}
		if present {
			out.ReferenceBytes = ptr(Hex(ref.Bytes()))
		}
		return out, nil
	}))

	registerSolver(KindBundleEncode, solve1(func(_ context.Context, in bundleEncodeInput) (any, error) {
		if err := needIn("hash_id", in.HashID != nil); err != nil {
			return nil, err
		}
		arts := make([]asl.Artifact, len(in.Entries))
		for i, j := range in.Entries {
			a, err := j.artifact()
			if err != nil {
				return nil, err
			}
			arts[i] = a
		}
		b, err := encodeBundle(asl.HashID(*in.HashID), arts, in.Roots)
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		return bundleJSON{Bundle: ptr(Hex(b))}, nil
	}))
	registerSolver(KindBundleDecode, solve1(func(_ context.Context, in bundleJSON) (any, error) {
		if err := needIn("bundle", in.Bundle != nil); err != nil {
			return nil, err
		}
		entries, roots, err := decodeBundle(*in.Bundle)
		if err != nil {
			rj, rerr := bundleRejectOf(err)
			if rerr != nil {
				return nil, rerr
			}
			return rejectExpect{rj}, nil
		}
		return bundleAcceptExpect{Entries: entries, Roots: roots}, nil
	}))

	registerSolver(KindProgramEncode, solve1(func(_ context.Context, in programInput) (any, error) {
		if err := needIn("program", in.Program != nil); err != nil {
			return nil, err
		}
		p, err := in.Program.program()
		if err != nil {
			return nil, err
		}
		b, err := pel.EncodeProgram(p)
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		return programEncodeExpect{ProgramBytes: ptr(Hex(b)), Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagPELProgramDAG1, b)).String()}, nil
	}))
	registerSolver(KindProgramDecode, solve1(func(_ context.Context, in programBytesInput) (any, error) {
		if err := needIn("program_bytes", in.ProgramBytes != nil); err != nil {
			return nil, err
		}
		p, err := pel.DecodeProgram(*in.ProgramBytes)
		if err != nil {
			var pe *pel.ProgramError
			if !errors.As(err, &pe) {
				return nil, fmt.Errorf("rejected without a program error: %w", err)
			}
			return programDecodeExpect{Reject: RejectOf(err, ""), DiagnosticCode: ptr(pe.Code)}, nil
		}
		pv := programToVec(p)
		return programDecodeExpect{Program: &pv}, nil
	}))
	registerSolver(KindCanonicalOrder, solve1(func(_ context.Context, in programInput) (any, error) {
		if err := needIn("program", in.Program != nil); err != nil {
			return nil, err
		}
		p, err := in.Program.program()
		if err != nil {
			return nil, err
		}
		order, err := pel.CanonicalOrder(p)
		if err != nil {
			var pe *pel.ProgramError
			if !errors.As(err, &pe) {
				return nil, fmt.Errorf("CanonicalOrder: %w", err)
			}
			d := diagsToVec([]pel.DiagnosticEntry{pe.Diagnostic()})[0]
			return orderExpect{Invalid: &d}, nil
		}
		got := make([]uint32, len(order))
		for i, id := range order {
			got[i] = uint32(id)
		}
		return orderExpect{Order: &got}, nil
	}))
	registerSolver(KindExecDAG, solve1(func(_ context.Context, in execInput) (any, error) {
		prog, inputs, params, err := in.artifacts()
		if err != nil {
			return nil, err
		}
		reg, err := vectorRegistry(in.Registry)
		if err != nil {
			return nil, err
		}
		var events []pel.NodeEvent
		obs := pel.ObserverFunc(func(e pel.NodeEvent) { events = append(events, e) })
		outs, res, err := pel.ExecDAGWith(reg, prog, inputs, params, obs, pel.RunOptions{Limits: in.Limits.limits()})
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		rv, err := pel.EncodeResultValue(res)
		if err != nil {
			return nil, err
		}
		exp := execExpect{Status: res.Status.String(), StatusCode: ptr(res.Summary.StatusCode), Kind: res.Summary.Kind.String(),
			Outputs: []artifactJSON{}, Diagnostics: diagsToVec(res.Diagnostics), Nodes: []nodeEventVec{}, ResultValue: ptr(Hex(rv))}
		for _, o := range outs {
			exp.Outputs = append(exp.Outputs, artifactToJSON(o))
		}
		for _, e := range events {
			exp.Nodes = append(exp.Nodes, nodeEventVec{ID: uint32(e.NodeID), Status: e.Status.String(), StatusCode: e.StatusCode})
		}
		return exp, nil
	}))
	registerSolver(KindResultValueEncode, solve1(func(_ context.Context, in valueInput) (any, error) {
		if err := needIn("value", in.Value != nil); err != nil {
			return nil, err
		}
		val, err := in.Value.value()
		if err != nil {
			return nil, err
		}
		b, err := pel.EncodeResultValue(val)
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		return valueBytesJSON{ValueBytes: ptr(Hex(b))}, nil
	}))
	registerSolver(KindResultValueDecode, solve1(func(_ context.Context, in valueBytesJSON) (any, error) {
		if err := needIn("value_bytes", in.ValueBytes != nil); err != nil {
			return nil, err
		}
		val, err := pel.DecodeResultValue(*in.ValueBytes)
		if err != nil {
			return rejectExpect{RejectOf(err, "")}, nil
		}
		vv := valueToVec(val)
		return valueDecodeExpect{Value: &vv}, nil
	}))
	registerSolver(KindDescriptorEncode, solve1(func(_ context.Context, in descriptorInput) (any, error) {
		if err := needIn("descriptor", in.Descriptor != nil); err != nil {
			return nil, err
		}
		b := pel.EncodeDescriptor(in.Descriptor.descriptor())
		return descriptorEncodeExpect{DescriptorBytes: ptr(Hex(b)), Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(pel.TagSchemeDescriptor, b)).String()}, nil
	}))
	registerSolver(KindDescriptorDecode, solve1(func(_ context.Context, in descriptorBytesInput) (any, error) {
		if err := needIn("descriptor_bytes", in.DescriptorBytes != nil); err != nil {
			return nil, err
		}
		d, err := pel.DecodeDescriptor(*in.DescriptorBytes)
		if err != nil {
			return rejectExpect{RejectOf(err, "")}, nil
		}
		dv := descriptorToVec(d)
		return descriptorDecodeExpect{Descriptor: &dv}, nil
	}))
	registerSolver(KindSchemeRefDAG1, solve1(func(_ context.Context, _ struct{}) (any, error) {
		d := pel.SchemeDescriptor()
		return schemeRefExpect{TypeTag: ptr(uint32(d.Tag)), DescriptorBytes: ptr(Hex(d.Bytes)), SchemeRef: pel.SchemeRefDAG1.String()}, nil
	}))

	registerSolver(KindTraceEncode, solve1(func(_ context.Context, in traceInput) (any, error) {
		if err := needIn("trace", in.Trace != nil); err != nil {
			return nil, err
		}
		t, err := in.Trace.trace()
		if err != nil {
			return nil, err
		}
		b, err := trace.Encode(t)
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		return traceEncodeExpect{TraceBytes: ptr(Hex(b)), Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagPELTraceDAG1, b)).String()}, nil
	}))
	registerSolver(KindTraceDecode, solve1(func(_ context.Context, in traceBytesInput) (any, error) {
		if err := needIn("trace_bytes", in.TraceBytes != nil); err != nil {
			return nil, err
		}
		t, err := trace.Decode(*in.TraceBytes)
		if err != nil {
			return rejectExpect{RejectOf(err, "")}, nil
		}
		tv := traceToVec(t)
		return traceDecodeExpect{Trace: &tv}, nil
	}))

	registerSolver(KindResultEncode, solve1(func(_ context.Context, in resultInput) (any, error) {
		if err := needIn("result", in.Result != nil); err != nil {
			return nil, err
		}
		r, err := in.Result.result()
		if err != nil {
			return nil, err
		}
		b, err := surf.AppendResult(nil, r)
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		return resultEncodeExpect{ResultBytes: ptr(Hex(b)), Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagPEL1Result1, b)).String()}, nil
	}))
	registerSolver(KindResultDecode, solve1(func(_ context.Context, in resultBytesInput) (any, error) {
		if err := needIn("result_bytes", in.ResultBytes != nil); err != nil {
			return nil, err
		}
		r, err := surf.DecodeResult(*in.ResultBytes)
		if err != nil {
			return rejectExpect{RejectOf(err, "")}, nil
		}
		rv := resultToVec(r)
		return resultDecodeExpect{Result: &rv}, nil
	}))
	registerSolver(KindSurfaceRun, solve1(solveSurfaceRun))

	registerSolver(KindEdgeEncode, solve1(func(_ context.Context, in edgeInput) (any, error) {
		if err := needIn("edge", in.Edge != nil); err != nil {
			return nil, err
		}
		e, err := in.Edge.edge()
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		b, err := tgk.Append(nil, e)
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		return edgeEncodeExpect{EdgeBytes: ptr(Hex(b)), Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagTGK1EdgeV1, b)).String()}, nil
	}))
	registerSolver(KindEdgeDecode, solve1(func(_ context.Context, in edgeBytesInput) (any, error) {
		if err := needIn("edge_bytes", in.EdgeBytes != nil); err != nil {
			return nil, err
		}
		e, err := tgk.Decode(*in.EdgeBytes)
		if err != nil {
			return edgeDecodeExpect{Reject: RejectOf(err, "")}, nil
		}
		ev := edgeToVec(e)
		return edgeDecodeExpect{Edge: &ev}, nil
	}))
	registerSolver(KindRequestKey, solve1(func(_ context.Context, in requestKeyInput) (any, error) {
		if err := needIn("request, request.input_refs and salt", in.Request != nil && in.Request.InputRefs != nil && in.Salt != nil); err != nil {
			return nil, err
		}
		req, err := in.Request.request()
		if err != nil {
			return nil, fmt.Errorf("bad input: %w", err)
		}
		key := surf.RequestKey(req, asl.HashID(in.HashID), *in.Salt)
		return keyExpect{Key: ptr(Hex(key[:]))}, nil
	}))
	registerSolver(KindNodeKey, solve1(func(_ context.Context, in nodeKeyInput) (any, error) {
		if err := needIn("params", in.Params != nil); err != nil {
			return nil, err
		}
		inputs := make([]asl.Artifact, len(in.Inputs))
		for i, a := range in.Inputs {
			art, err := a.artifact()
			if err != nil {
				return nil, err
			}
			inputs[i] = art
		}
		var global *asl.Artifact
		if in.Global != nil {
			g, err := in.Global.artifact()
			if err != nil {
				return nil, err
			}
			global = &g
		}
		var salt []byte
		if in.Salt != nil {
			salt = *in.Salt
		}
		key := surf.NodeKey(asl.HashID(in.HashID), pel.OperationID{Name: in.Op, Version: in.Version}, *in.Params, inputs, global, salt)
		return keyExpect{Key: ptr(Hex(key[:]))}, nil
	}))
}

// solveSurfaceRun runs a surface_run request against a fresh in-memory
// store, the store a testee keeps for the request (§21.4).
func solveSurfaceRun(ctx context.Context, in surfRunInput) (any, error) {
	id, arts, req, err := in.parse()
	if err != nil {
		return nil, err
	}
	s := memstore.New()
	if len(arts) > 0 {
		if _, err := s.PutBatch(ctx, id, arts); err != nil {
			return nil, fmt.Errorf("loading the store: %w", err)
		}
	}
	for _, d := range in.Damaged {
		ref, err := refText("damaged.ref", d.Ref)
		if err != nil {
			return nil, err
		}
		if !s.Corrupt(ref, d.StoredBytes) {
			return nil, fmt.Errorf("bad input: cannot damage %s (not in the store)", ref)
		}
	}
	run, err := surf.New(s, surf.Options{Hash: id}).Run(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("surface run: %w", err)
	}
	resultArt, err := run.Result.Artifact()
	if err != nil {
		return nil, err
	}
	traceArt, err := run.Trace.Artifact()
	if err != nil {
		return nil, err
	}
	exp := surfRunExpect{Status: run.Result.Value.Status.String(), StatusCode: ptr(run.Result.Value.Summary.StatusCode),
		ResultRef: run.ResultRef.String(), TraceRef: run.TraceRef.String(), EdgeRef: run.EdgeRef.String(), OutputRefs: refsToText(run.OutputRefs), Outputs: []artifactJSON{},
		ResultBytes: ptr(Hex(resultArt.Bytes)), TraceBytes: ptr(Hex(traceArt.Bytes))}
	for _, o := range run.Outputs {
		exp.Outputs = append(exp.Outputs, artifactToJSON(o))
	}
	if run.Result.HasStoreFailure {
		f := run.Result.StoreFailure
		exp.StoreFailure = &storeFailureNameVec{Phase: f.Phase.String(), InputIndex: f.InputIndex, Ref: f.Ref.String(), Error: f.Error.String()}
	}
	return exp, nil
}
