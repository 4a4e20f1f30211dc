package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/surf"
)

// The surface vector kinds (SPECS.md §14, PEL/1-SURF and ENC/PEL1-RESULT/1).
const (
	// result_encode: {"result":resultVec} -> {"result_bytes":hex,
	// "reference":text}, the SHA-256 reference of the result artifact (tag
	// 0x00000103).
	KindResultEncode = "result_encode"
	// result_decode: {"result_bytes":hex} -> {"result":resultVec} or
	// {"reject":Reject}.
	KindResultDecode = "result_decode"
	// surface_run: a store's initial content, damage to it and a request ->
	// the run's status, references, outputs, store failure and the exact
	// result and trace bytes. See surfRunInput and surfRunExpect.
	KindSurfaceRun = "surface_run"
)

func init() {
	Register(KindResultEncode, checkResultEncode)
	Register(KindResultDecode, checkResultDecode)
	Register(KindSurfaceRun, checkSurfaceRun)
}

type resultInput struct {
	Result *resultVec `json:"result"`
}

type resultEncodeExpect struct {
	ResultBytes *Hex   `json:"result_bytes"`
	Reference   string `json:"reference"`
}

type resultBytesInput struct {
	ResultBytes *Hex `json:"result_bytes"`
}

type resultDecodeExpect struct {
	Result *resultVec `json:"result,omitempty"`
	Reject *Reject    `json:"reject,omitempty"`
}

func checkResultEncode(_ context.Context, v Vector) error {
	var in resultInput
	var exp resultEncodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.result and expect.result_bytes", in.Result != nil && exp.ResultBytes != nil); err != nil {
		return err
	}
	r, err := in.Result.result()
	if err != nil {
		return err
	}
	b, err := surf.AppendResult(nil, r)
	if err != nil {
		return fmt.Errorf("AppendResult: %v", err)
	}
	if err := eqBytes("ResultBytes", b, *exp.ResultBytes); err != nil {
		return err
	}
	if ref := asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagPEL1Result1, b)); ref.String() != exp.Reference {
		return fmt.Errorf("result reference = %s, want %s", ref, exp.Reference)
	}
	return nil
}

func checkResultDecode(_ context.Context, v Vector) error {
	var in resultBytesInput
	var exp resultDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.result_bytes", in.ResultBytes != nil); err != nil {
		return err
	}
	r, err := surf.DecodeResult(*in.ResultBytes)
	if exp.Reject != nil {
		if exp.Result != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject)
	}
	if err := need("expect.result", exp.Result != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	if err := eqResult(r, *exp.Result); err != nil {
		return err
	}
	back, err := surf.AppendResult(nil, r)
	if err != nil {
		return err
	}
	return eqBytes("re-encoding", back, *in.ResultBytes)
}

// surfRequestVec is a surface request; scheme_ref null means
// SchemeRef_DAG_1, params_ref null means no global params.
type surfRequestVec struct {
	SchemeRef  *string  `json:"scheme_ref"`
	ProgramRef string   `json:"program_ref"`
	InputRefs  []string `json:"input_refs"`
	ParamsRef  *string  `json:"params_ref"`
	// Limits are the request's deterministic bounds (§14.7); absent means
	// unbounded.
	Limits *limitsVec `json:"limits,omitempty"`
}

// damageVec replaces what the store holds under ref with stored_bytes (the
// type tag stays), so that reading ref fails verification: "stored bytes
// differ".
type damageVec struct {
	Ref         string `json:"ref"`
	StoredBytes Hex    `json:"stored_bytes"`
}

// surfRunInput: a fresh store receives every artifact of "store" (put under
// hash_id, the surface's hash), then the damage is applied, then the
// request runs with the kernel registry and hash_id.
type surfRunInput struct {
	HashID  *uint16         `json:"hash_id"`
	Store   []artifactJSON  `json:"store"`
	Damaged []damageVec     `json:"damaged"`
	Request *surfRequestVec `json:"request"`
}

// storeFailureNameVec is a store failure with phase and error names.
type storeFailureNameVec struct {
	Phase      string `json:"phase"`
	InputIndex uint32 `json:"input_index"`
	Ref        string `json:"ref"`
	Error      string `json:"error"`
}

type surfRunExpect struct {
	Status       string               `json:"status"`
	StatusCode   *uint32              `json:"status_code"`
	ResultRef    string               `json:"result_ref"`
	TraceRef     string               `json:"trace_ref"`
	EdgeRef      string               `json:"edge_ref"`
	OutputRefs   []string             `json:"output_refs"`
	Outputs      []artifactJSON       `json:"outputs"`
	StoreFailure *storeFailureNameVec `json:"store_failure"`
	ResultBytes  *Hex                 `json:"result_bytes"`
	TraceBytes   *Hex                 `json:"trace_bytes"`
}

func (in surfRunInput) parse() (asl.HashID, []asl.Artifact, surf.Request, error) {
	var req surf.Request
	if in.HashID == nil || in.Request == nil {
		return 0, nil, req, errors.New("bad vector: input.hash_id and input.request are required")
	}
	id := asl.HashID(*in.HashID)
	if _, ok := asl.LookupHash(id); !ok {
		return 0, nil, req, fmt.Errorf("bad vector: hash_id 0x%04x is not registered", *in.HashID)
	}
	arts := make([]asl.Artifact, len(in.Store))
	for i, a := range in.Store {
		var err error
		if arts[i], err = a.artifact(); err != nil {
			return 0, nil, req, err
		}
	}
	r := in.Request
	var errs []error
	var err error
	if r.SchemeRef != nil {
		req.SchemeRef, err = refText("request.scheme_ref", *r.SchemeRef)
		errs = append(errs, err)
	}
	req.ProgramRef, err = refText("request.program_ref", r.ProgramRef)
	errs = append(errs, err)
	req.InputRefs, err = refsText("request.input_refs", r.InputRefs)
	errs = append(errs, err)
	req.ParamsRef, req.HasParams, err = optRefText("request.params_ref", r.ParamsRef)
	errs = append(errs, err)
	req.Limits = r.Limits.limits()
	return id, arts, req, errors.Join(errs...)
}

// surfaceOutcome is what a surface run leaves behind, read back from the
// store: the run, the stored result, trace and provenance edge artifacts and
// the outputs.
type surfaceOutcome struct {
	run       *surf.Run
	result    asl.Artifact
	trace     asl.Artifact
	edge      asl.Artifact
	outputs   []asl.Artifact
	foundFrom asl.Reference // the trace FindTrace finds from the result
}

// runSurface loads arts into s, applies damage through corrupt, runs req
// and reads everything the run stored back from s. It then runs req a
// second time (answered by the action cache, or recomputed when the store
// has none or the result records a store failure) and demands the same
// references.
func runSurface(ctx context.Context, s asl.Store, corrupt func(asl.Reference, []byte) bool, id asl.HashID,
	arts []asl.Artifact, damage []damageVec, req surf.Request) (*surfaceOutcome, error) {
	if len(arts) > 0 {
		if _, err := s.PutBatch(ctx, id, arts); err != nil {
			return nil, fmt.Errorf("loading the store: %w", err)
		}
	}
	for _, d := range damage {
		ref, err := refText("damaged.ref", d.Ref)
		if err != nil {
			return nil, err
		}
		if corrupt == nil || !corrupt(ref, d.StoredBytes) {
			return nil, fmt.Errorf("bad vector: cannot damage %s (not in the store)", ref)
		}
	}
	run, err := surf.New(s, surf.Options{Hash: id}).Run(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("surface run: %w", err)
	}
	o := &surfaceOutcome{run: run}
	if o.result, err = asl.Get(ctx, s, run.ResultRef, 0); err != nil {
		return nil, fmt.Errorf("reading the stored result: %w", err)
	}
	if o.trace, err = asl.Get(ctx, s, run.TraceRef, 0); err != nil {
		return nil, fmt.Errorf("reading the stored trace: %w", err)
	}
	if o.edge, err = asl.Get(ctx, s, run.EdgeRef, 0); err != nil {
		return nil, fmt.Errorf("reading the stored provenance edge: %w", err)
	}
	for _, r := range run.OutputRefs {
		a, err := asl.Get(ctx, s, r, 0)
		if err != nil {
			return nil, fmt.Errorf("reading stored output %s: %w", r, err)
		}
		o.outputs = append(o.outputs, a)
	}
	if o.foundFrom, err = surf.FindTrace(ctx, s, run.ResultRef); err != nil {
		return nil, fmt.Errorf("FindTrace: %w", err)
	}
	again, err := surf.New(s, surf.Options{Hash: id}).Run(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("repeated surface run: %w", err)
	}
	if again.ResultRef != run.ResultRef || again.TraceRef != run.TraceRef || !slices.Equal(again.OutputRefs, run.OutputRefs) {
		return nil, fmt.Errorf("repeating the request gave result %s trace %s outputs %v, the first run %s %s %v",
			again.ResultRef, again.TraceRef, again.OutputRefs, run.ResultRef, run.TraceRef, run.OutputRefs)
	}
	return o, nil
}

// pebbleSurfaceRuns counts surface_run checks repeated on a Pebble store.
var pebbleSurfaceRuns atomic.Int64

func checkSurfaceRun(ctx context.Context, v Vector) error {
	var in surfRunInput
	var exp surfRunExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("expect.status_code, result_bytes and trace_bytes", exp.StatusCode != nil && exp.ResultBytes != nil && exp.TraceBytes != nil); err != nil {
		return err
	}
	id, arts, req, err := in.parse()
	if err != nil {
		return err
	}
	ms := memstore.New()
	mem, err := runSurface(ctx, ms, ms.Corrupt, id, arts, in.Damaged, req)
	if err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	if err := mem.compare(exp); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	dir, err := os.MkdirTemp("", "amduat-conformance-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ps, err := pebblestore.Create(dir, &pebblestore.Options{DefaultHash: id})
	if err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	peb, err := runSurface(ctx, ps, ps.Corrupt, id, arts, in.Damaged, req)
	if cerr := ps.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	pebbleSurfaceRuns.Add(1)
	if err := peb.compare(exp); err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	return nil
}

// compare checks an outcome against every expectation.
func (o *surfaceOutcome) compare(exp surfRunExpect) error {
	run := o.run
	v := run.Result.Value
	switch {
	case v.Status.String() != exp.Status || v.Summary.StatusCode != *exp.StatusCode:
		return fmt.Errorf("status %s status_code %d, want %s %d (diagnostics %v)", v.Status, v.Summary.StatusCode, exp.Status, *exp.StatusCode, diagsToVec(v.Diagnostics))
	case run.ResultRef.String() != exp.ResultRef:
		return fmt.Errorf("result_ref = %s, want %s", run.ResultRef, exp.ResultRef)
	case run.TraceRef.String() != exp.TraceRef:
		return fmt.Errorf("trace_ref = %s, want %s", run.TraceRef, exp.TraceRef)
	case run.EdgeRef.String() != exp.EdgeRef:
		return fmt.Errorf("edge_ref = %s, want %s", run.EdgeRef, exp.EdgeRef)
	case o.foundFrom != run.TraceRef:
		return fmt.Errorf("FindTrace(result) = %s, want the run's trace %s", o.foundFrom, run.TraceRef)
	case !o.result.HasTag || o.result.Tag != asl.TagPEL1Result1 || !o.trace.HasTag || o.trace.Tag != asl.TagPELTraceDAG1:
		return fmt.Errorf("stored result tag %s, trace tag %s", o.result.Header().TagString(), o.trace.Header().TagString())
	case !bytes.Equal(o.result.Bytes, *exp.ResultBytes):
		return fmt.Errorf("stored result bytes = %x, want %x", o.result.Bytes, []byte(*exp.ResultBytes))
	case !bytes.Equal(o.trace.Bytes, *exp.TraceBytes):
		return fmt.Errorf("stored trace bytes = %x, want %x", o.trace.Bytes, []byte(*exp.TraceBytes))
	}
	if err := eqRefs("output_refs", run.OutputRefs, exp.OutputRefs); err != nil {
		return err
	}
	if err := eqArtifacts("stored outputs", o.outputs, exp.Outputs); err != nil {
		return err
	}
	var got *storeFailureNameVec
	if run.Result.HasStoreFailure {
		f := run.Result.StoreFailure
		got = &storeFailureNameVec{Phase: f.Phase.String(), InputIndex: f.InputIndex, Ref: f.Ref.String(), Error: f.Error.String()}
	}
	if (got == nil) != (exp.StoreFailure == nil) || got != nil && *got != *exp.StoreFailure {
		return fmt.Errorf("store_failure = %+v, want %+v", got, exp.StoreFailure)
	}
	// The run's in-memory values are the stored ones.
	if !slices.Equal(refsToText(run.Result.OutputRefs), refsToText(run.OutputRefs)) {
		return fmt.Errorf("result names outputs %v, run returned %v", run.Result.OutputRefs, run.OutputRefs)
	}
	if !o.edge.HasTag || o.edge.Tag != asl.TagTGK1EdgeV1 {
		return fmt.Errorf("stored provenance edge has type tag %s, want 0x%08x", o.edge.Header().TagString(), uint32(asl.TagTGK1EdgeV1))
	}
	return nil
}
