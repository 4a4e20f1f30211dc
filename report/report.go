// Package report holds the JSON objects that describe runs, PEL artifacts,
// replay verifications and provenance graphs (SPECS.md §16.4, §16.5, §18).
// The command line prints them under --json and the HTTP server returns
// them, so both give the same bytes for the same store content. Every
// object is deterministic: lists are never null, edges are sorted by
// reference, and no time or address appears.
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
	"github.com/amduat/amduat/trace"
)

// RefPtr returns &r, or nil when present is false.
func RefPtr(r asl.Reference, present bool) *asl.Reference {
	if !present {
		return nil
	}
	return &r
}

// RefList never returns nil, so JSON shows [] rather than null.
func RefList(refs []asl.Reference) []asl.Reference {
	if refs == nil {
		return []asl.Reference{}
	}
	return refs
}

// Diag is a DiagnosticEntry in JSON. Messages that are not valid UTF-8 have
// the bad bytes replaced by U+FFFD.
type Diag struct {
	Code    uint32 `json:"code"`
	Message string `json:"message"`
}

// Diags renders ds; never nil.
func Diags(ds []pel.DiagnosticEntry) []Diag {
	out := make([]Diag, len(ds))
	for i, d := range ds {
		out[i] = Diag{Code: d.Code, Message: strings.ToValidUTF8(string(d.Message), "\uFFFD")}
	}
	return out
}

// StoreFailure is a surface store failure in JSON.
type StoreFailure struct {
	Phase      string        `json:"phase"`
	InputIndex uint32        `json:"input_index"`
	Ref        asl.Reference `json:"ref"`
	Error      string        `json:"error"`
}

// NewStoreFailure renders r's store failure, nil when it has none.
func NewStoreFailure(r surf.Result) *StoreFailure {
	if !r.HasStoreFailure {
		return nil
	}
	f := r.StoreFailure
	return &StoreFailure{Phase: f.Phase.String(), InputIndex: f.InputIndex, Ref: f.Ref, Error: f.Error.String()}
}

// Cache states of a run (Run.Cache).
const (
	CacheHit  = "hit"  // the action cache answered; nothing executed
	CacheMiss = "miss" // the run executed
	CacheOff  = "off"  // the request bypassed the cache
)

// Run is the object `pel run --json` prints and POST /v1/pel/run returns
// (SPECS.md §16.4).
type Run struct {
	Status       string          `json:"status"`
	StatusCode   uint32          `json:"status_code"`
	ResultRef    asl.Reference   `json:"result_ref"`
	TraceRef     asl.Reference   `json:"trace_ref"`
	OutputRefs   []asl.Reference `json:"output_refs"`
	Diagnostics  []Diag          `json:"diagnostics"`
	StoreFailure *StoreFailure   `json:"store_failure"`
	// Cache is CacheHit, CacheMiss or CacheOff.
	Cache string `json:"cache"`
	// NodesReused: nodes answered by the node memo.
	NodesReused int `json:"nodes_reused"`
	// EdgeRef: the run's TGK/1 provenance edge.
	EdgeRef asl.Reference `json:"edge_ref"`
}

// NewRun renders a finished run; noCache says the request bypassed the
// action cache.
func NewRun(r *surf.Run, noCache bool) Run {
	v := r.Result.Value
	cache := CacheMiss
	switch {
	case noCache:
		cache = CacheOff
	case r.CacheHit:
		cache = CacheHit
	}
	return Run{
		Status: v.Status.String(), StatusCode: v.Summary.StatusCode,
		ResultRef: r.ResultRef, TraceRef: r.TraceRef, OutputRefs: RefList(r.OutputRefs),
		Diagnostics: Diags(v.Diagnostics), StoreFailure: NewStoreFailure(r.Result),
		Cache: cache, NodesReused: r.NodesReused, EdgeRef: r.EdgeRef,
	}
}

// Kind names the PEL artifact types Show recognises by type tag: "program",
// "trace", "result", "scheme_descriptor", or "" for any other artifact.
func Kind(a asl.Artifact) string {
	if !a.HasTag {
		return ""
	}
	switch a.Tag {
	case asl.TagPELProgramDAG1:
		return "program"
	case asl.TagPELTraceDAG1:
		return "trace"
	case asl.TagPEL1Result1:
		return "result"
	case pel.TagSchemeDescriptor:
		return "scheme_descriptor"
	}
	return ""
}

// Limits is a result's deterministic bounds; null when unbounded.
type Limits struct {
	MaxNodes       uint64 `json:"max_nodes"`
	MaxOutputBytes uint64 `json:"max_output_bytes"`
}

// Result is the `pel show --json` object of a surface result.
type Result struct {
	Type         string          `json:"type"`
	Ref          asl.Reference   `json:"ref"`
	ProgramRef   asl.Reference   `json:"program_ref"`
	InputRefs    []asl.Reference `json:"input_refs"`
	ParamsRef    *asl.Reference  `json:"params_ref"`
	Limits       *Limits         `json:"limits"`
	SchemeRef    asl.Reference   `json:"scheme_ref"`
	PEL1Version  uint16          `json:"pel1_version"`
	Status       string          `json:"status"`
	StatusCode   uint32          `json:"status_code"`
	ErrorKind    string          `json:"error_kind"`
	OutputRefs   []asl.Reference `json:"output_refs"`
	Diagnostics  []Diag          `json:"diagnostics"`
	StoreFailure *StoreFailure   `json:"store_failure"`
	TraceRef     *asl.Reference  `json:"trace_ref"`
}

// NewResult renders the result ref; traceRef is its trace, nil when no
// stored trace names it.
func NewResult(ref asl.Reference, r surf.Result, traceRef *asl.Reference) Result {
	v := r.Value
	var lim *Limits
	if r.Limits != (pel.Limits{}) {
		lim = &Limits{MaxNodes: r.Limits.MaxNodes, MaxOutputBytes: r.Limits.MaxOutputBytes}
	}
	return Result{
		Limits: lim,
		Type:   "result", Ref: ref, ProgramRef: r.ProgramRef, InputRefs: RefList(r.InputRefs),
		ParamsRef: RefPtr(r.ParamsRef, r.HasParams), SchemeRef: v.SchemeRef, PEL1Version: v.PEL1Version,
		Status: v.Status.String(), StatusCode: v.Summary.StatusCode, ErrorKind: v.Summary.Kind.String(),
		OutputRefs: RefList(r.OutputRefs), Diagnostics: Diags(v.Diagnostics),
		StoreFailure: NewStoreFailure(r), TraceRef: traceRef,
	}
}

// TraceNode is one node of a Trace.
type TraceNode struct {
	NodeID      uint32          `json:"node_id"`
	Op          string          `json:"op"`
	Version     uint32          `json:"version"`
	Status      string          `json:"status"`
	StatusCode  uint32          `json:"status_code"`
	OutputRefs  []asl.Reference `json:"output_refs"`
	Diagnostics []Diag          `json:"diagnostics"`
}

// Trace is the `pel show --json` object of a trace.
type Trace struct {
	Type          string          `json:"type"`
	Ref           asl.Reference   `json:"ref"`
	SchemeRef     asl.Reference   `json:"scheme_ref"`
	ProgramRef    asl.Reference   `json:"program_ref"`
	InputRefs     []asl.Reference `json:"input_refs"`
	ParamsRef     *asl.Reference  `json:"params_ref"`
	ExecResultRef asl.Reference   `json:"exec_result_ref"`
	Status        string          `json:"status"`
	StatusCode    uint32          `json:"status_code"`
	Nodes         []TraceNode     `json:"nodes"`
}

// NewTrace renders the trace ref.
func NewTrace(ref asl.Reference, t trace.Trace) Trace {
	j := Trace{
		Type: "trace", Ref: ref, SchemeRef: t.SchemeRef, ProgramRef: t.ProgramRef, InputRefs: RefList(t.InputRefs),
		ParamsRef: RefPtr(t.ParamsRef, t.HasParams), ExecResultRef: t.ExecResultRef,
		Status: t.Status.String(), StatusCode: t.StatusCode, Nodes: make([]TraceNode, len(t.Nodes)),
	}
	for i, n := range t.Nodes {
		j.Nodes[i] = TraceNode{NodeID: uint32(n.NodeID), Op: n.Op.Name, Version: n.Op.Version,
			Status: n.Status.String(), StatusCode: n.StatusCode, OutputRefs: RefList(n.OutputRefs),
			Diagnostics: Diags(n.Diagnostics)}
	}
	return j
}

// TagText renders a type tag as 0x%08x.
func TagText(t asl.TypeTag) string { return fmt.Sprintf("0x%08x", uint32(t)) }

// GlobalParamsName names a descriptor's global-params mode.
func GlobalParamsName(v uint8) string {
	switch v {
	case pel.GlobalParamsIgnored:
		return "ignored"
	case pel.GlobalParamsExposed:
		return "exposed"
	}
	return fmt.Sprintf("0x%02x", v)
}

// Descriptor is the `pel show --json` object of a scheme descriptor.
type Descriptor struct {
	Type           string        `json:"type"`
	Ref            asl.Reference `json:"ref"`
	DescriptorID   string        `json:"descriptor_id"`
	SchemeID       string        `json:"scheme_id"`
	PEL1Version    uint16        `json:"pel1_version"`
	ProgramTypeTag string        `json:"program_type_tag"`
	TraceTypeTag   string        `json:"trace_type_tag"`
	ResultTypeTag  string        `json:"result_type_tag"`
	OpRegistry     string        `json:"op_registry"`
	ParamsProfile  string        `json:"params_profile"`
	GlobalParams   string        `json:"global_params"`
	SchemeRefDAG1  bool          `json:"scheme_ref_dag_1"`
}

// NewDescriptor renders the descriptor ref.
func NewDescriptor(ref asl.Reference, d pel.Descriptor) Descriptor {
	return Descriptor{
		Type: "scheme_descriptor", Ref: ref, DescriptorID: d.DescriptorID, SchemeID: d.SchemeID,
		PEL1Version: d.PEL1Version, ProgramTypeTag: TagText(d.ProgramTag), TraceTypeTag: TagText(d.TraceTag),
		ResultTypeTag: TagText(d.ResultTag), OpRegistry: d.OpRegistry, ParamsProfile: d.ParamsProfile,
		GlobalParams: GlobalParamsName(d.GlobalParams), SchemeRefDAG1: ref == pel.SchemeRefDAG1,
	}
}

// ProgramJSONLine renders p in the JSON program format (SPECS.md §15) on
// one line ending in a newline, as every --json output is; params of the
// operations in reg (nil: the kernel) are written in their readable form.
func ProgramJSONLine(p pel.Program, reg *opreg.Registry) ([]byte, error) {
	j, err := pel.ProgramToJSON(p, reg)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, j); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// Line encodes v as one line of JSON, without HTML escaping, ending in a
// newline.
func Line(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ErrNotPEL: Show was given an artifact that is not a PEL program, result,
// trace or scheme descriptor.
var ErrNotPEL = errors.New("not a PEL program, result, trace or scheme descriptor")

// UndecodableError: an artifact's bytes do not decode as its type tag says.
type UndecodableError struct {
	Ref  asl.Reference
	Kind string
	Err  error
}

func (e *UndecodableError) Error() string {
	return fmt.Sprintf("%s: %s artifact does not decode: %v", e.Ref, e.Kind, e.Err)
}

func (e *UndecodableError) Unwrap() error { return e.Err }

// FindTrace looks up the trace of a result; found is false when no stored
// trace names it.
func FindTrace(ctx context.Context, s asl.Store, resultRef asl.Reference) (asl.Reference, bool, error) {
	tref, err := surf.FindTrace(ctx, s, resultRef)
	switch {
	case errors.Is(err, surf.ErrNoTrace):
		return asl.Reference{}, false, nil
	case err != nil:
		return asl.Reference{}, false, err
	}
	return tref, true, nil
}

// ShowJSON renders the `pel show --json` line of the PEL artifact art stored
// under ref: a program in the JSON program format, a result (with the trace
// found through the store), a trace or a scheme descriptor. Another type is
// ErrNotPEL; bytes that do not decode are an *UndecodableError. Programs
// render their params readably for the operations in reg (nil: the kernel).
func ShowJSON(ctx context.Context, s asl.Store, ref asl.Reference, art asl.Artifact, reg *opreg.Registry) ([]byte, error) {
	kind := Kind(art)
	switch kind {
	case "program":
		p, err := pel.DecodeProgramArtifact(art)
		if err != nil {
			return nil, &UndecodableError{ref, kind, err}
		}
		return ProgramJSONLine(p, reg)
	case "result":
		res, err := surf.DecodeResultArtifact(art)
		if err != nil {
			return nil, &UndecodableError{ref, kind, err}
		}
		tref, found, err := FindTrace(ctx, s, ref)
		if err != nil {
			return nil, err
		}
		return Line(NewResult(ref, res, RefPtr(tref, found)))
	case "trace":
		t, err := trace.DecodeArtifact(art)
		if err != nil {
			return nil, &UndecodableError{ref, kind, err}
		}
		return Line(NewTrace(ref, t))
	case "scheme_descriptor":
		d, err := pel.DecodeDescriptor(art.Bytes)
		if err != nil {
			return nil, &UndecodableError{ref, kind, err}
		}
		return Line(NewDescriptor(ref, d))
	}
	return nil, fmt.Errorf("%s: type tag %s: %w", ref, art.Header().TagString(), ErrNotPEL)
}

// Mismatch is the first difference a replay found.
type Mismatch struct {
	Artifact string         `json:"artifact"`
	Stored   *asl.Reference `json:"stored"`
	Replayed *asl.Reference `json:"replayed"`
	Detail   string         `json:"detail"`
}

// Verification is the object `pel verify --json` prints and POST
// /v1/pel/verify returns.
type Verification struct {
	ResultRef asl.Reference  `json:"result_ref"`
	TraceRef  *asl.Reference `json:"trace_ref"`
	Verified  bool           `json:"verified"`
	Mismatch  *Mismatch      `json:"mismatch"`
}

// NewVerification renders the replay of the result ref.
func NewVerification(ref asl.Reference, v *surf.Verification) Verification {
	j := Verification{ResultRef: ref, TraceRef: RefPtr(v.TraceRef, !v.TraceRef.IsZero()), Verified: v.Mismatch == nil}
	if m := v.Mismatch; m != nil {
		j.Mismatch = &Mismatch{Artifact: m.Artifact, Stored: RefPtr(m.Stored, !m.Stored.IsZero()),
			Replayed: RefPtr(m.Replayed, !m.Replayed.IsZero()), Detail: m.Detail}
	}
	return j
}

// Endpoint is one end of a provenance edge.
type Endpoint struct {
	Role string        `json:"role"`
	Ref  asl.Reference `json:"ref"`
}

// Edge is a provenance edge of a Graph.
type Edge struct {
	Ref  asl.Reference `json:"ref"`
	Type uint32        `json:"type"`
	From []Endpoint    `json:"from"`
	To   []Endpoint    `json:"to"`
}

// GraphArtifact is one artifact a provenance walk reached.
type GraphArtifact struct {
	Ref   asl.Reference   `json:"ref"`
	Depth int             `json:"depth"`
	Via   []asl.Reference `json:"edges"`
}

// Graph is the object `prov why|uses --json` prints and GET
// /v1/prov/why|uses/REF returns (SPECS.md §16.5).
type Graph struct {
	Root       asl.Reference   `json:"root"`
	Artifacts  []GraphArtifact `json:"artifacts"`
	Edges      []Edge          `json:"edges"`
	Truncated  bool            `json:"truncated"`
	Unreadable []asl.Reference `json:"unreadable_edges"`
}

// Endpoints renders eps.
func Endpoints(eps []tgk.Endpoint) []Endpoint {
	out := make([]Endpoint, len(eps))
	for i, ep := range eps {
		out[i] = Endpoint{ep.Role.String(), ep.Ref}
	}
	return out
}

// SortedEdgeRefs lists g's edges in ascending ReferenceBytes order, so
// every rendering is deterministic.
func SortedEdgeRefs(g *tgk.Graph) []asl.Reference {
	refs := make([]asl.Reference, 0, len(g.Edges))
	for r := range g.Edges {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(x, y asl.Reference) int { return strings.Compare(string(x.Bytes()), string(y.Bytes())) })
	return refs
}

// NewGraph renders g.
func NewGraph(g *tgk.Graph) Graph {
	out := Graph{Root: g.Root, Truncated: g.Truncated, Artifacts: []GraphArtifact{}, Edges: []Edge{},
		Unreadable: append([]asl.Reference{}, g.Unreadable...)}
	for _, r := range g.Order {
		out.Artifacts = append(out.Artifacts, GraphArtifact{r, g.Depth[r], append([]asl.Reference{}, g.Via[r]...)})
	}
	for _, r := range SortedEdgeRefs(g) {
		e := g.Edges[r]
		out.Edges = append(out.Edges, Edge{r, uint32(e.Type), Endpoints(e.From), Endpoints(e.To)})
	}
	return out
}

// Build is the object `pel build --json` prints and POST /v1/pel/programs
// returns.
type Build struct {
	Ref     asl.Reference `json:"ref"`
	Size    uint64        `json:"size"`
	TypeTag uint32        `json:"type_tag"`
	Nodes   int           `json:"nodes"`
	Roots   int           `json:"roots"`
	Valid   bool          `json:"valid"`
	// Problem is why the program is not valid against the registry
	// (the diagnostic Exec_DAG would report); empty when valid.
	Problem string `json:"problem,omitempty"`
}

// NewBuild describes the program p stored as art under ref, checking it
// against reg (nil: the kernel registry).
func NewBuild(ref asl.Reference, art asl.Artifact, p pel.Program, reg *opreg.Registry) Build {
	b := Build{Ref: ref, Size: uint64(len(art.Bytes)), TypeTag: uint32(art.Tag),
		Nodes: len(p.Nodes), Roots: len(p.Roots), Valid: true}
	if _, err := pel.Prepare(p, reg); err != nil {
		b.Valid, b.Problem = false, strings.Join(strings.Fields(err.Error()), " ")
	}
	return b
}

// RunRequest is the body of POST /v1/pel/run (SPECS.md §18.6): a surface
// request by reference with the options of `pel run`.
type RunRequest struct {
	ProgramRef     asl.Reference   `json:"program_ref"`
	InputRefs      []asl.Reference `json:"input_refs"`
	ParamsRef      *asl.Reference  `json:"params_ref,omitempty"`
	SchemeRef      *asl.Reference  `json:"scheme_ref,omitempty"`
	Hash           string          `json:"hash,omitempty"`
	MaxNodes       uint64          `json:"max_nodes,omitempty"`
	MaxOutputBytes uint64          `json:"max_output_bytes,omitempty"`
	NoCache        bool            `json:"no_cache,omitempty"`
	MemoNodes      bool            `json:"memo_nodes,omitempty"`
	// TimeoutMillis is the run's wall-time bound; 0 means the server's,
	// and the server's bound caps it.
	TimeoutMillis int64 `json:"timeout_ms,omitempty"`
}

// Surface returns the surface request of r.
func (r RunRequest) Surface() surf.Request {
	req := surf.Request{ProgramRef: r.ProgramRef, InputRefs: r.InputRefs,
		Limits: pel.Limits{MaxNodes: r.MaxNodes, MaxOutputBytes: r.MaxOutputBytes}}
	if r.ParamsRef != nil {
		req.ParamsRef, req.HasParams = *r.ParamsRef, true
	}
	if r.SchemeRef != nil {
		req.SchemeRef = *r.SchemeRef
	}
	return req
}

// VerifyRequest is the body of POST /v1/pel/verify.
type VerifyRequest struct {
	ResultRef asl.Reference `json:"result_ref"`
}
