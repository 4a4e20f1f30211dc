package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// The surface case tables: runs by reference against a store (§14.3) and
// the result encoding (§14.1, §14.2). The same runs provide the trace
// encodings (trace_cases.go).

const (
	specSurfRun    = "§14.3"
	specResult     = "§14.1"
	specResultDecd = "§14.2"
)

func init() {
	RegisterGenerator("surf.run", genSurfRun)
	RegisterGenerator("surf.result", genSurfResult)
}

type damage struct {
	of    asl.Artifact // the stored artifact to damage
	bytes []byte       // what the store then holds instead of its bytes
}

type surfCase struct {
	name, desc string
	hash       asl.HashID // zero: HASH-ASL1-256
	store      []asl.Artifact
	damaged    []damage
	// The request, by artifact: program, inputs and params are referenced
	// under the case's hash whether stored or not. A non-nil ref overrides.
	scheme     *asl.Reference
	program    asl.Artifact
	programRef *asl.Reference
	inputs     []asl.Artifact
	inputRefs  map[int]asl.Reference
	params     *asl.Artifact
	paramsRef  *asl.Reference
	limits     pel.Limits
	status     pel.ExecutionStatus
	failure    surf.StoreError // expected store failure class, 0 for none
}

func (c surfCase) hashID() asl.HashID {
	if c.hash == 0 {
		return asl.HashSHA256
	}
	return c.hash
}

func (c surfCase) ref(a asl.Artifact) asl.Reference { return asl.MustDerive(c.hashID(), a) }

func (c surfCase) request() surf.Request {
	req := surf.Request{ProgramRef: c.ref(c.program)}
	if c.programRef != nil {
		req.ProgramRef = *c.programRef
	}
	if c.scheme != nil {
		req.SchemeRef = *c.scheme
	}
	for i, a := range c.inputs {
		r := c.ref(a)
		if o, ok := c.inputRefs[i]; ok {
			r = o
		}
		req.InputRefs = append(req.InputRefs, r)
	}
	if c.params != nil {
		req.ParamsRef, req.HasParams = c.ref(*c.params), true
	}
	if c.paramsRef != nil {
		req.ParamsRef, req.HasParams = *c.paramsRef, true
	}
	req.Limits = c.limits
	return req
}

// unsupportedRef is a well-formed reference under the unregistered hash id
// 0x7777: every store answers ERR_UNSUPPORTED for it.
var unsupportedRef = sync.OnceValue(func() asl.Reference {
	return asl.MustParseReference("7777" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
})

func surfCases() []surfCase {
	seed := func(name string) asl.Artifact { return progArt(mustSeed(name)) }
	paramsProg := progArt(pel.Program{Nodes: []pel.Node{opNode(1, opreg.OpParams, nil)}, Roots: roots(1, 0)})
	unknownOp := progArt(pel.Program{Nodes: []pel.Node{opNode(1, opreg.OperationID{Name: "acme.unknown", Version: 1}, nil)}, Roots: roots(1, 0)})
	badRoot := progArt(pel.Program{Nodes: []pel.Node{constNode(1, "x"), opNode(2, opreg.OpHash, nil, pel.FromNode(1, 0))}, Roots: roots(2, 0, 1, 1)})
	hello := asl.Untagged([]byte("hello"))
	space := asl.Untagged([]byte("hello "))
	world := asl.Tagged(7, []byte("world"))
	ab := asl.Untagged([]byte("ab"))
	cfg := asl.Tagged(0x42, []byte("cfg"))
	absent := asl.Untagged([]byte("never stored"))
	garbage := []byte("these are not the stored bytes")
	other := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("another scheme")))
	dag1Blake3 := asl.MustDerive(asl.HashBLAKE3, pel.SchemeDescriptor())
	unsup := unsupportedRef()
	ok, ip, ii, rf, su := pel.StatusOK, pel.StatusInvalidProgram, pel.StatusInvalidInputs, pel.StatusRuntimeFailed, pel.StatusSchemeUnsupported
	nf, ig, us := surf.StoreErrNotFound, surf.StoreErrIntegrity, surf.StoreErrUnsupported
	return []surfCase{
		{name: "ok.const", desc: "seed const, no inputs: one output \"hello\"", store: []asl.Artifact{seed("const")}, program: seed("const"), status: ok},
		{name: "ok.concat", desc: "seed concat of \"hello \" and a tagged \"world\"", store: []asl.Artifact{seed("concat"), space, world},
			program: seed("concat"), inputs: []asl.Artifact{space, world}, status: ok},
		{name: "ok.same-input-twice", desc: "seed concat with the same input reference twice", store: []asl.Artifact{seed("concat"), hello},
			program: seed("concat"), inputs: []asl.Artifact{hello, hello}, status: ok},
		{name: "ok.const-hash", desc: "seed const-hash: two nodes, the trace records both", store: []asl.Artifact{seed("const-hash")}, program: seed("const-hash"), status: ok},
		{name: "ok.params", desc: "pel.bytes.params with a tagged global params artifact: the output is it, tag kept",
			store: []asl.Artifact{paramsProg, cfg}, program: paramsProg, params: &cfg, status: ok},
		{name: "ok.params-unused", desc: "seed const with a global params artifact it does not read: params_ref is recorded",
			store: []asl.Artifact{seed("const"), cfg}, program: seed("const"), params: &cfg, status: ok},
		{name: "ok.blake3", desc: "seed slice with the surface hash BLAKE3-256: every stored reference uses hash id 0x8001", hash: asl.HashBLAKE3,
			store: []asl.Artifact{seed("slice"), hello}, program: seed("slice"), inputs: []asl.Artifact{hello}, status: ok},
		{name: "ok.empty-program", desc: "a program with no nodes and no roots: OK, no outputs", store: []asl.Artifact{progArt(pel.Program{})}, program: progArt(pel.Program{}), status: ok},

		{name: "invalid-program.missing", desc: "the program is not stored: ERR_NOT_FOUND, Exec_DAG not called", program: seed("const"), status: ip, failure: nf},
		{name: "invalid-program.damaged", desc: "the stored program's bytes differ: ERR_INTEGRITY", store: []asl.Artifact{seed("const")},
			damaged: []damage{{seed("const"), garbage}}, program: seed("const"), status: ip, failure: ig},
		{name: "invalid-program.unsupported-hash", desc: "the program reference has unregistered hash id 0x7777: ERR_UNSUPPORTED",
			program: seed("const"), programRef: &unsup, status: ip, failure: us},
		{name: "invalid-program.before-inputs", desc: "program and input both missing: the program is resolved first",
			program: seed("hash"), inputs: []asl.Artifact{absent}, status: ip, failure: nf},
		{name: "invalid-program.not-a-program", desc: "the program reference names an untagged artifact: Exec_DAG reports INVALID_PROGRAM without a store failure",
			store: []asl.Artifact{hello}, program: hello, status: ip},
		{name: "invalid-program.unknown-op", desc: "a program with an unknown operation: no node records in the trace",
			store: []asl.Artifact{unknownOp}, program: unknownOp, status: ip},
		{name: "invalid-program.root-output-index", desc: "every node runs OK, then root 1 names a missing output: INVALID_PROGRAM with OK node records",
			store: []asl.Artifact{badRoot}, program: badRoot, status: ip},

		{name: "invalid-inputs.missing-input", desc: "input 1 is not stored: ERR_NOT_FOUND at input_index 1",
			store: []asl.Artifact{seed("concat"), hello}, program: seed("concat"), inputs: []asl.Artifact{hello, absent}, status: ii, failure: nf},
		{name: "invalid-inputs.damaged-input", desc: "the stored input's bytes differ: ERR_INTEGRITY",
			store: []asl.Artifact{seed("hash"), hello}, damaged: []damage{{hello, garbage}}, program: seed("hash"), inputs: []asl.Artifact{hello}, status: ii, failure: ig},
		{name: "invalid-inputs.unsupported-input", desc: "the input reference has unregistered hash id 0x7777: ERR_UNSUPPORTED",
			store: []asl.Artifact{seed("hash")}, program: seed("hash"), inputs: []asl.Artifact{hello}, inputRefs: map[int]asl.Reference{0: unsup}, status: ii, failure: us},
		{name: "invalid-inputs.first-failing-input", desc: "input 0 missing and input 1 damaged: input 0 is reported",
			store: []asl.Artifact{seed("concat"), hello}, damaged: []damage{{hello, garbage}}, program: seed("concat"), inputs: []asl.Artifact{absent, hello}, status: ii, failure: nf},
		{name: "invalid-inputs.input-before-params", desc: "an input and the params both missing: inputs are resolved before params",
			store: []asl.Artifact{paramsProg}, program: paramsProg, inputs: []asl.Artifact{absent}, params: &cfg, status: ii, failure: nf},
		{name: "invalid-inputs.missing-params", desc: "the params artifact is not stored: ERR_NOT_FOUND in the params phase",
			store: []asl.Artifact{paramsProg}, program: paramsProg, params: &cfg, status: ii, failure: nf},
		{name: "invalid-inputs.damaged-params", desc: "the stored params artifact's bytes differ: ERR_INTEGRITY in the params phase",
			store: []asl.Artifact{paramsProg, cfg}, damaged: []damage{{cfg, garbage}}, program: paramsProg, params: &cfg, status: ii, failure: ig},
		{name: "invalid-inputs.unsupported-params", desc: "the params reference has unregistered hash id 0x7777: ERR_UNSUPPORTED in the params phase",
			store: []asl.Artifact{paramsProg}, program: paramsProg, paramsRef: &unsup, status: ii, failure: us},
		{name: "invalid-inputs.before-invalid-program", desc: "a stored program with an unknown operation and a missing input: the store failure wins, Exec_DAG is not called",
			store: []asl.Artifact{unknownOp}, program: unknownOp, inputs: []asl.Artifact{absent}, status: ii, failure: nf},
		{name: "invalid-inputs.index-out-of-range", desc: "seed concat with one input: Exec_DAG reports INVALID_INPUTS, no store failure",
			store: []asl.Artifact{seed("concat"), hello}, program: seed("concat"), inputs: []asl.Artifact{hello}, status: ii},
		{name: "invalid-inputs.params-not-given", desc: "pel.bytes.params without params: INVALID_INPUTS from Exec_DAG",
			store: []asl.Artifact{paramsProg}, program: paramsProg, status: ii},

		{name: "runtime-failed.slice", desc: "seed slice of \"ab\": RUNTIME_FAILED, status_code 0x00030001",
			store: []asl.Artifact{seed("slice"), ab}, program: seed("slice"), inputs: []asl.Artifact{ab}, status: rf},

		{name: "ok.within-limits", desc: "seed const-hash with max_nodes 2 and max_output_bytes 37: OK, the bounds are recorded in the result",
			store: []asl.Artifact{seed("const-hash")}, program: seed("const-hash"), limits: pel.Limits{MaxNodes: 2, MaxOutputBytes: 37}, status: ok},
		{name: "runtime-failed.max-nodes", desc: "seed const-hash with max_nodes 1: RUNTIME_FAILED, status_code 4",
			store: []asl.Artifact{seed("const-hash")}, program: seed("const-hash"), limits: pel.Limits{MaxNodes: 1}, status: rf},
		{name: "runtime-failed.max-output-bytes", desc: "seed concat with max_output_bytes 5 on 11 bytes of output: RUNTIME_FAILED, status_code 5",
			store: []asl.Artifact{seed("concat"), space, world}, program: seed("concat"), inputs: []asl.Artifact{space, world}, limits: pel.Limits{MaxOutputBytes: 5}, status: rf},

		{name: "scheme-unsupported.other", desc: "a scheme reference other than SchemeRef_DAG_1; nothing is resolved (the program is not even stored)",
			scheme: &other, program: seed("const"), status: su},
		{name: "scheme-unsupported.descriptor-blake3", desc: "the DAG-1 descriptor's BLAKE3 reference is not SchemeRef_DAG_1 (its SHA-256 reference)",
			scheme: &dag1Blake3, store: []asl.Artifact{seed("const")}, program: seed("const"), status: su},
	}
}

// runSurfCase runs c on a fresh memstore and checks the status and store
// failure the case states.
func runSurfCase(c surfCase) (*surf.Run, error) {
	ctx := context.Background()
	ms := memstore.New()
	if len(c.store) > 0 {
		if _, err := ms.PutBatch(ctx, c.hashID(), c.store); err != nil {
			return nil, err
		}
	}
	for _, d := range c.damaged {
		if !ms.Corrupt(c.ref(d.of), d.bytes) {
			return nil, fmt.Errorf("surf case %s: damaged artifact not stored", c.name)
		}
	}
	run, err := surf.New(ms, surf.Options{Hash: c.hashID()}).Run(ctx, c.request())
	if err != nil {
		return nil, fmt.Errorf("surf case %s: %w", c.name, err)
	}
	v := run.Result.Value
	f := run.Result.StoreFailure
	if v.Status != c.status || run.Result.HasStoreFailure != (c.failure != 0) || c.failure != 0 && f.Error != c.failure {
		return nil, fmt.Errorf("surf case %s: status %s store failure %v %+v, want %s and %v", c.name, v.Status, run.Result.HasStoreFailure, f, c.status, c.failure)
	}
	return run, nil
}

func genSurfRun() ([]Vector, error) {
	var l vectorList
	for _, c := range surfCases() {
		run, err := runSurfCase(c)
		if err != nil {
			return nil, err
		}
		req := c.request()
		id := uint16(c.hashID())
		in := surfRunInput{HashID: &id, Store: []artifactJSON{}, Damaged: []damageVec{}, Request: &surfRequestVec{
			ProgramRef: req.ProgramRef.String(), InputRefs: refsToText(req.InputRefs), ParamsRef: optRefToText(req.ParamsRef, req.HasParams),
			Limits: limitsToVec(req.Limits)}}
		if c.scheme != nil {
			in.Request.SchemeRef = ptr(c.scheme.String())
		}
		for _, a := range c.store {
			in.Store = append(in.Store, artifactToJSON(a))
		}
		for _, d := range c.damaged {
			in.Damaged = append(in.Damaged, damageVec{Ref: c.ref(d.of).String(), StoredBytes: Hex(d.bytes)})
		}
		resultArt, _ := run.Result.Artifact()
		traceArt, _ := run.Trace.Artifact()
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
		l.add("surf.run."+c.name, c.desc, specSurfRun, KindSurfaceRun, in, exp)
	}
	return l.vs, l.err
}

// rawResult assembles ResultBytes from parts, for rejection cases: params
// is the OptionalEncodedRef and the has_limits part (e.g. 00 00: no params,
// no limits).
func rawResult(program asl.Reference, inputs []asl.Reference, params []byte, value []byte, outputs []asl.Reference, tail []byte) []byte {
	w := enc.Writer{Buf: asl.AppendEncodedRef(nil, program)}
	w.U32(uint32(len(inputs)))
	for _, r := range inputs {
		w.Buf = asl.AppendEncodedRef(w.Buf, r)
	}
	w.Raw(params)
	w.Raw(value)
	w.U32(uint32(len(outputs)))
	for _, r := range outputs {
		w.Buf = asl.AppendEncodedRef(w.Buf, r)
	}
	w.Raw(tail)
	return w.Buf
}

func storeFailureBytes(phase byte, index uint32, ref asl.Reference, e byte) []byte {
	w := enc.Writer{Buf: []byte{1, phase}}
	w.U32(index)
	w.Buf = asl.AppendEncodedRef(w.Buf, ref)
	w.U8(e)
	return w.Buf
}

func resultRejects() []bytesCase {
	p := asl.MustDerive(asl.HashSHA256, progArt(mustSeed("const")))
	in := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hello")))
	val := func(s pel.ExecutionStatus, code uint32) []byte {
		b, err := pel.EncodeResultValue(pel.ExecutionResultValue{PEL1Version: 1, Status: s, SchemeRef: pel.SchemeRefDAG1,
			Summary: pel.ExecutionErrorSummary{Kind: s.Kind(), StatusCode: code}})
		if err != nil {
			panic(err)
		}
		return b
	}
	okV, ipV, iiV := val(pel.StatusOK, 0), val(pel.StatusInvalidProgram, 2), val(pel.StatusInvalidInputs, 3)
	noParams := h("00 00") // no params_ref, has_limits 0x00
	withParams := cat(asl.AppendOptionalEncodedRef(nil, in, true), h("00"))
	none := h("00")
	sfProgram := storeFailureBytes(1, 0, p, 1)
	return []bytesCase{
		{"empty", "no bytes: program_ref missing", nil},
		{"program-ref-len-1", "program_ref with ref_len 1", h("00000001 00")},
		{"input-count-past-end", "input_refs count 2 with one EncodedRef: the second is missing", cat(asl.AppendEncodedRef(nil, p), h("00000002"), asl.AppendEncodedRef(nil, in))},
		{"input-count-2^32-1", "input_refs count 2^32-1: rejected before allocating", cat(asl.AppendEncodedRef(nil, p), h("ffffffff"), make([]byte, 24))},
		{"params-flag-02", "params_ref flag 0x02", rawResult(p, nil, h("02"), okV, nil, none)},
		{"limits-flag-02", "has_limits 0x02", rawResult(p, nil, h("00 02"), okV, nil, none)},
		{"limits-both-zero", "has_limits 0x01 with max_nodes 0 and max_output_bytes 0 (must be written as 0x00)",
			rawResult(p, nil, cat(h("00 01"), make([]byte, 16)), okV, nil, none)},
		{"limits-truncated", "has_limits 0x01 with max_output_bytes cut after 4 bytes", cat(asl.AppendEncodedRef(nil, p), h("00000000 00 01 0000000000000001 00000000"))},
		{"value-version-2", "the embedded value has pel1_version 2", rawResult(p, nil, noParams, cat(h("0002"), okV[2:]), nil, none)},
		{"value-ok-code-1", "the embedded value is OK with status_code 1", rawResult(p, nil, noParams, cat(okV[:len(okV)-8], h("00000001 00000000")), nil, none)},
		{"output-count-past-end", "output_refs count 1 with nothing following", cat(asl.AppendEncodedRef(nil, p), h("00000000"), noParams, okV, h("00000001"))},
		{"store-failure-flag-02", "has_store_failure 0x02", rawResult(p, nil, noParams, okV, nil, h("02"))},
		{"store-failure-missing", "has_store_failure missing", rawResult(p, nil, noParams, okV, nil, nil)},
		{"store-failure-truncated", "a store failure cut before its error byte", rawResult(p, nil, noParams, ipV, nil, sfProgram[:len(sfProgram)-1])},
		{"trailing-byte", "a complete result followed by one byte", rawResult(p, nil, noParams, okV, nil, h("00 00"))},
		{"outputs-with-failure-status", "output_refs present while the status is INVALID_PROGRAM", rawResult(p, nil, noParams, ipV, []asl.Reference{in}, none)},
		{"store-failure-phase-0", "store failure phase 0x00 is undefined", rawResult(p, nil, noParams, ipV, nil, storeFailureBytes(0, 0, p, 1))},
		{"store-failure-phase-4", "store failure phase 0x04 is undefined", rawResult(p, nil, noParams, ipV, nil, storeFailureBytes(4, 0, p, 1))},
		{"store-failure-error-0", "store failure error 0x00 is undefined", rawResult(p, nil, noParams, ipV, nil, storeFailureBytes(1, 0, p, 0))},
		{"store-failure-error-4", "store failure error 0x04 is undefined", rawResult(p, nil, noParams, ipV, nil, storeFailureBytes(1, 0, p, 4))},
		{"program-phase-wrong-status", "a program-phase store failure with status INVALID_INPUTS", rawResult(p, nil, noParams, iiV, nil, storeFailureBytes(1, 0, p, 1))},
		{"input-phase-wrong-status", "an input-phase store failure with status INVALID_PROGRAM", rawResult(p, []asl.Reference{in}, noParams, ipV, nil, storeFailureBytes(2, 0, in, 1))},
		{"input-index-out-of-range", "input phase with input_index 1 and one input", rawResult(p, []asl.Reference{in}, noParams, iiV, nil, storeFailureBytes(2, 1, in, 1))},
		{"program-phase-nonzero-index", "program phase with input_index 1", rawResult(p, []asl.Reference{in, in}, noParams, ipV, nil, storeFailureBytes(1, 1, p, 1))},
		{"params-phase-without-params", "params phase while params_ref is absent", rawResult(p, nil, noParams, iiV, nil, storeFailureBytes(3, 0, in, 1))},
		{"store-failure-ref-mismatch", "the failing reference is not the requested input", rawResult(p, []asl.Reference{in}, noParams, iiV, nil, storeFailureBytes(2, 0, p, 1))},
		{"params-phase-ref-mismatch", "params phase naming the program instead of the params", rawResult(p, nil, withParams, iiV, nil, storeFailureBytes(3, 0, p, 1))},
	}
}

func genSurfResult() ([]Vector, error) {
	var l vectorList
	picked := map[string]bool{
		"ok.concat": true, "ok.params": true, "ok.blake3": true, "invalid-program.missing": true,
		"invalid-inputs.missing-input": true, "invalid-inputs.damaged-params": true, "invalid-program.unsupported-hash": true,
		"runtime-failed.slice": true, "scheme-unsupported.other": true, "invalid-inputs.index-out-of-range": true,
		"ok.within-limits": true, "runtime-failed.max-nodes": true,
	}
	var results []struct {
		name, desc string
		r          surf.Result
	}
	for _, c := range surfCases() {
		if !picked[c.name] {
			continue
		}
		run, err := runSurfCase(c)
		if err != nil {
			return nil, err
		}
		results = append(results, struct {
			name, desc string
			r          surf.Result
		}{c.name, "the result of the run: " + c.desc, run.Result})
	}
	if len(results) != len(picked) {
		return nil, fmt.Errorf("surf.result: %d of %d picked runs found", len(results), len(picked))
	}
	for _, c := range results {
		b, err := surf.AppendResult(nil, c.r)
		if err != nil {
			return nil, err
		}
		rv, bh := resultToVec(c.r), Hex(b)
		l.add("surf.result.encode."+c.name, "encode "+c.desc, specResult, KindResultEncode, resultInput{Result: &rv},
			resultEncodeExpect{ResultBytes: &bh, Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagPEL1Result1, b)).String()})
	}
	for _, c := range results {
		b, _ := surf.AppendResult(nil, c.r)
		r, err := surf.DecodeResult(b)
		if err != nil {
			return nil, fmt.Errorf("%s: own encoding rejected: %w", c.name, err)
		}
		rv, bh := resultToVec(r), Hex(b)
		l.add("surf.result.decode."+c.name, "decode and re-encode "+c.desc, specResultDecd, KindResultDecode, resultBytesInput{ResultBytes: &bh}, resultDecodeExpect{Result: &rv})
	}
	for _, c := range resultRejects() {
		_, err := surf.DecodeResult(c.in)
		var de *enc.DecodeError
		if !errors.As(err, &de) {
			return nil, fmt.Errorf("result reject case %s: %v", c.name, err)
		}
		in := Hex(c.in)
		l.add("surf.result.reject."+c.name, "reject: "+c.desc, specResultDecd, KindResultDecode, resultBytesInput{ResultBytes: &in}, rejectExpect{RejectOf(err, "")})
	}
	return l.vs, l.err
}
