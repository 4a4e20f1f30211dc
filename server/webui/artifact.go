package webui

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
	"github.com/amduat/amduat/trace"
)

// artifactPage is the data of the page of one artifact. Exactly one of
// Program, Result, Trace, Edge, Descriptor is set when the artifact decodes
// as its type tag says; Preview is set for every other artifact and for one
// that does not decode.
type artifactPage struct {
	page
	Ref         refView
	Kind        string
	Size        string
	TypeTag     string
	StoredSize  string
	Compression string
	Notice      string
	Browse      string // the directory page of a tree

	Program    *programView
	Result     *resultView
	Trace      *traceView
	Edge       *edgeView
	Descriptor []kv
	Preview    *previewView

	Why, Uses provView
}

type kv struct {
	Key, Value string
	Ref        *refView
}

func (h *handler) serveArtifact(w http.ResponseWriter, r *http.Request, text string) {
	ctx := r.Context()
	ref, ok := h.parseRef(w, text)
	if !ok {
		return
	}
	info, err := h.s.Stat(ctx, ref)
	if err != nil {
		h.storeError(w, ref, text, err)
		return
	}
	kind := kindOf(info.Header)
	title := "artifact " + shortRef(ref.String())
	if kind != "" {
		title = kind + " " + shortRef(ref.String())
	}
	p := &artifactPage{
		page:        h.page(title, ref.String()),
		Ref:         h.refView(ref),
		Kind:        kind,
		Size:        sizeText(info.Size),
		TypeTag:     tagText(info.Header),
		StoredSize:  "unknown",
		Compression: info.Compression,
	}
	if info.StoredSize >= 0 {
		p.StoredSize = sizeText(uint64(info.StoredSize))
	}
	if p.Compression == "" {
		p.Compression = "unknown"
	}

	switch {
	case kind != "" && info.Size > MaxDecode:
		p.Notice = fmt.Sprintf("This %s is %s, above the %s this view decodes; its start is shown instead.", kind, sizeText(info.Size), sizeText(MaxDecode))
	case kind != "":
		art, err := asl.Get(ctx, h.s, ref, MaxDecode)
		if err != nil {
			h.storeError(w, ref, text, err)
			return
		}
		if err := h.decode(ctx, p, ref, art); err != nil {
			p.Notice = fmt.Sprintf("The type tag says %s, but the bytes do not decode as one: %s", kind, printable([]byte(err.Error())))
			p.Preview = makePreview(art.Bytes, uint64(len(art.Bytes)), h.maxPreview)
		}
	}
	if p.Program == nil && p.Result == nil && p.Trace == nil && p.Edge == nil && p.Descriptor == nil && p.Preview == nil {
		prev, err := h.fetchPreview(ctx, ref, h.maxPreview)
		if err != nil {
			h.storeError(w, ref, text, err)
			return
		}
		p.Preview = prev
	}
	if info.HasTag && info.Tag == tree.Tag {
		p.Kind, p.Browse = "directory tree", h.treeURL(ref, "")
	}
	p.Why = h.provView(ctx, ref, true)
	p.Uses = h.provView(ctx, ref, false)
	h.render(w, http.StatusOK, "artifact", p)
}

// decode fills the view of a PEL or TGK artifact; an error means the bytes
// do not decode as the tag says (a content problem, not a store failure).
func (h *handler) decode(ctx context.Context, p *artifactPage, ref asl.Reference, art asl.Artifact) error {
	switch p.Kind {
	case "program":
		prog, err := pel.DecodeProgramArtifact(art)
		if err != nil {
			return err
		}
		p.Program = h.programView(ref, prog, nil)
	case "result":
		res, err := surf.DecodeResultArtifact(art)
		if err != nil {
			return err
		}
		p.Result = h.resultView(ctx, ref, res)
	case "trace":
		t, err := trace.DecodeArtifact(art)
		if err != nil {
			return err
		}
		p.Trace = h.traceView(ctx, t)
	case "provenance edge":
		e, err := tgk.DecodeArtifact(art)
		if err != nil {
			return err
		}
		p.Edge = h.edgeView(e)
	case "scheme descriptor":
		d, err := pel.DecodeDescriptor(art.Bytes)
		if err != nil {
			return err
		}
		p.Descriptor = h.descriptorView(ref, d)
	}
	return nil
}

// programView is a program: its DAG, its nodes and roots, and whether it is
// valid for the kernel registry. With a run, nodes carry their trace records.
type programView struct {
	Ref       refView
	NodeCount int
	RootCount int
	Nodes     []nodeView
	Omitted   int
	Roots     []rootView
	Valid     bool
	Invalid   string
	Order     string
	DAG       *dagView
	DAGNote   string
	Run       bool // nodes carry trace records
	Nested    bool // shown on a result's or trace's page
}

type nodeView struct {
	ID          uint32
	Op          string
	Inputs      []linkText
	ParamsLen   string
	ParamsHex   string
	Readable    string
	ParamsError string
	Roots       string
	Class       string
	Status      string
	StatusCode  string
	Outputs     []refView
	Diagnostics []diagView
}

type linkText struct {
	Text string
	Href string
}

type rootView struct {
	Index       int
	NodeID      uint32
	OutputIndex uint32
	Output      *refView
}

// maxParamsHex bounds the params bytes shown in hex per node.
const maxParamsHex = 64

func (h *handler) programView(ref asl.Reference, p pel.Program, rc *runContext) *programView {
	v := &programView{Ref: h.refView(ref), NodeCount: len(p.Nodes), RootCount: len(p.Roots), Run: rc != nil && rc.trace != nil, Nested: rc != nil}
	for i := range p.Nodes {
		if i == MaxTableNodes {
			v.Omitted = len(p.Nodes) - i
			break
		}
		v.Nodes = append(v.Nodes, h.nodeView(p, &p.Nodes[i], rc))
	}
	for k, r := range p.Roots {
		rv := rootView{Index: k, NodeID: uint32(r.NodeID), OutputIndex: r.OutputIndex}
		if rc != nil && k < len(rc.outputs) {
			rv.Output = h.refPtr(rc.outputs[k])
		}
		v.Roots = append(v.Roots, rv)
	}
	if pl, err := pel.Prepare(p, h.reg); err != nil {
		var pe *pel.ProgramError
		if errors.As(err, &pe) {
			v.Invalid = fmt.Sprintf("code 0x%08x: %s", pe.Code, printable([]byte(pe.Message)))
		} else {
			v.Invalid = printable([]byte(err.Error()))
		}
	} else {
		v.Valid = true
		ids := make([]string, 0, len(pl.Order()))
		for _, id := range pl.Order() {
			ids = append(ids, fmt.Sprintf("%d", id))
		}
		v.Order = truncateText(strings.Join(ids, " → "), 2000)
	}
	v.DAG, v.DAGNote = h.layoutDAG(p, rc)
	return v
}

func (h *handler) nodeView(p pel.Program, n *pel.Node, rc *runContext) nodeView {
	nv := nodeView{ID: uint32(n.ID), Op: printable([]byte(n.Op.String()))}
	for _, in := range n.Inputs {
		if in.Kind == pel.InputExternal {
			lt := linkText{Text: fmt.Sprintf("input %d", in.InputIndex)}
			if rc != nil && rc.hasInputs && int64(in.InputIndex) < int64(len(rc.inputs)) {
				lt.Href = h.artifactURL(rc.inputs[in.InputIndex])
			}
			nv.Inputs = append(nv.Inputs, lt)
		} else {
			nv.Inputs = append(nv.Inputs, linkText{Text: fmt.Sprintf("node %d output %d", in.NodeID, in.OutputIndex), Href: fmt.Sprintf("#node-%d", in.NodeID)})
		}
	}
	if len(n.Params) > 0 {
		nv.ParamsLen = sizeText(uint64(len(n.Params)))
		nv.ParamsHex = hex.EncodeToString(n.Params[:min(len(n.Params), maxParamsHex)])
		if len(n.Params) > maxParamsHex {
			nv.ParamsHex += "…"
		}
	}
	if op, ok := h.reg.Lookup(n.Op); ok && op.ParamsToJSON != nil {
		if pv, err := op.DecodeParams(n.Params); err != nil {
			nv.ParamsError = printable([]byte(err.Error()))
		} else if j, err := op.ParamsToJSON(pv); err == nil && j != nil {
			nv.Readable = truncateText(printable(j), h.maxPreview)
		}
	}
	var roots []string
	for k, r := range p.Roots {
		if r.NodeID == n.ID {
			roots = append(roots, fmt.Sprintf("root %d (output %d)", k, r.OutputIndex))
		}
	}
	nv.Roots = strings.Join(roots, ", ")
	class, text, rec := rc.nodeState(n.ID)
	nv.Class, nv.Status = class, text
	if rec != nil {
		nv.Status = rec.Status.String()
		nv.StatusCode = codeText(rec.StatusCode)
		nv.Outputs = h.refViews(rec.OutputRefs)
		nv.Diagnostics = diagViews(rec.Diagnostics)
	}
	return nv
}

// loadProgram reads and decodes the program a result or trace names;
// note says why it cannot be shown.
func (h *handler) loadProgram(ctx context.Context, ref asl.Reference) (prog pel.Program, note string) {
	art, err := asl.Get(ctx, h.s, ref, MaxDecode)
	if err != nil {
		return pel.Program{}, "The program cannot be shown: it is " + errText(err) + "."
	}
	prog, err = pel.DecodeProgramArtifact(art)
	if err != nil {
		return pel.Program{}, "The program does not decode: " + printable([]byte(err.Error()))
	}
	return prog, ""
}

// loadTrace reads and decodes a trace.
func (h *handler) loadTrace(ctx context.Context, ref asl.Reference) (trace.Trace, error) {
	art, err := asl.Get(ctx, h.s, ref, MaxDecode)
	if err != nil {
		return trace.Trace{}, err
	}
	return trace.DecodeArtifact(art)
}

type resultView struct {
	Status       string
	StatusClass  string
	StatusCode   string
	Kind         string
	PEL1Version  uint16
	Scheme       refView
	Limits       string
	Diagnostics  []diagView
	StoreFailure *storeFailureView
	Program      refView
	Inputs       []refView
	Params       *refView
	Outputs      []outputView
	OutOmitted   []refView
	Trace        *refView
	TraceNote    string
	ProgramView  *programView
	ProgramNote  string
}

type storeFailureView struct {
	Phase      string
	InputIndex string
	Ref        refView
	Error      string
}

type outputView struct {
	Index   int
	Ref     refView
	Preview *previewView
	Error   string
}

func (h *handler) resultView(ctx context.Context, ref asl.Reference, res surf.Result) *resultView {
	v := res.Value
	rv := &resultView{
		Status:      v.Status.String(),
		StatusClass: statusClass(v.Status),
		StatusCode:  codeText(v.Summary.StatusCode),
		Kind:        v.Summary.Kind.String(),
		PEL1Version: v.PEL1Version,
		Scheme:      h.refView(v.SchemeRef),
		Limits:      "none",
		Diagnostics: diagViews(v.Diagnostics),
		Program:     h.refView(res.ProgramRef),
		Inputs:      h.refViews(res.InputRefs),
	}
	if res.Limits != (pel.Limits{}) {
		rv.Limits = fmt.Sprintf("max_nodes %d, max_output_bytes %d", res.Limits.MaxNodes, res.Limits.MaxOutputBytes)
	}
	var params *asl.Reference
	if res.HasParams {
		params = &res.ParamsRef
		rv.Params = h.refPtr(res.ParamsRef)
	}
	if res.HasStoreFailure {
		f := res.StoreFailure
		sf := &storeFailureView{Phase: f.Phase.String(), Ref: h.refView(f.Ref), Error: f.Error.String()}
		if f.Phase == surf.PhaseInput {
			sf.InputIndex = fmt.Sprintf("%d", f.InputIndex)
		}
		rv.StoreFailure = sf
	}
	for k, o := range res.OutputRefs {
		if k == MaxOutputPreviews {
			rv.OutOmitted = h.refViews(res.OutputRefs[k:])
			break
		}
		ov := outputView{Index: k, Ref: h.refView(o)}
		if pv, err := h.fetchPreview(ctx, o, h.maxPreview); err != nil {
			ov.Error = errText(err)
		} else {
			ov.Preview = pv
		}
		rv.Outputs = append(rv.Outputs, ov)
	}

	var tr *trace.Trace
	tref, err := surf.FindTrace(ctx, h.s, ref)
	switch {
	case errors.Is(err, surf.ErrNoTrace):
		rv.TraceNote = "No stored trace names this result."
	case err != nil:
		rv.TraceNote = "The trace cannot be found: " + errText(err)
	default:
		rv.Trace = h.refPtr(tref)
		if t, err := h.loadTrace(ctx, tref); err != nil {
			rv.TraceNote = "The trace cannot be read: " + errText(err)
		} else {
			tr = &t
		}
	}

	prog, note := h.loadProgram(ctx, res.ProgramRef)
	if note != "" {
		rv.ProgramNote = note
		return rv
	}
	rv.ProgramView = h.programView(res.ProgramRef, prog, newRunContext(tr, res.InputRefs, params, res.OutputRefs))
	return rv
}

type traceView struct {
	Status      string
	StatusClass string
	StatusCode  string
	Scheme      refView
	Program     refView
	Inputs      []refView
	Params      *refView
	Result      refView
	Records     []nodeView
	ProgramView *programView
	ProgramNote string
}

func (h *handler) traceView(ctx context.Context, t trace.Trace) *traceView {
	tv := &traceView{
		Status:      t.Status.String(),
		StatusClass: statusClass(t.Status),
		StatusCode:  codeText(t.StatusCode),
		Scheme:      h.refView(t.SchemeRef),
		Program:     h.refView(t.ProgramRef),
		Inputs:      h.refViews(t.InputRefs),
		Result:      h.refView(t.ExecResultRef),
	}
	var params *asl.Reference
	if t.HasParams {
		params = &t.ParamsRef
		tv.Params = h.refPtr(t.ParamsRef)
	}
	prog, note := h.loadProgram(ctx, t.ProgramRef)
	if note != "" {
		tv.ProgramNote = note
		// Without the program, list the records alone.
		rc := newRunContext(&t, t.InputRefs, params, nil)
		for i, rec := range t.Nodes {
			if i == MaxTableNodes {
				break
			}
			n := pel.Node{ID: rec.NodeID, Op: rec.Op}
			tv.Records = append(tv.Records, h.nodeView(pel.Program{}, &n, rc))
		}
		return tv
	}
	// The outputs of an OK run are the root nodes' recorded outputs.
	var outputs []asl.Reference
	if t.Status == pel.StatusOK {
		rc := newRunContext(&t, nil, nil, nil)
		for _, r := range prog.Roots {
			rec, ok := rc.records[r.NodeID]
			if !ok || int64(r.OutputIndex) >= int64(len(rec.OutputRefs)) {
				outputs = nil
				break
			}
			outputs = append(outputs, rec.OutputRefs[r.OutputIndex])
		}
	}
	tv.ProgramView = h.programView(t.ProgramRef, prog, newRunContext(&t, t.InputRefs, params, outputs))
	return tv
}

type edgeView struct {
	Type     string
	From, To []endpointView
}

type endpointView struct {
	Role string
	Ref  refView
}

func (h *handler) endpoints(eps []tgk.Endpoint) []endpointView {
	out := make([]endpointView, len(eps))
	for i, ep := range eps {
		out[i] = endpointView{Role: ep.Role.String(), Ref: h.refView(ep.Ref)}
	}
	return out
}

func edgeTypeText(t tgk.EdgeType) string {
	if t == tgk.EdgeTypePELRun {
		return "PEL_RUN (0x00000001): one surface run"
	}
	return fmt.Sprintf("0x%08x (not defined by this project)", uint32(t))
}

func (h *handler) edgeView(e tgk.Edge) *edgeView {
	return &edgeView{Type: edgeTypeText(e.Type), From: h.endpoints(e.From), To: h.endpoints(e.To)}
}

func (h *handler) descriptorView(ref asl.Reference, d pel.Descriptor) []kv {
	gp := fmt.Sprintf("0x%02x", d.GlobalParams)
	switch d.GlobalParams {
	case pel.GlobalParamsIgnored:
		gp = "ignored"
	case pel.GlobalParamsExposed:
		gp = "exposed"
	}
	tag := func(t asl.TypeTag) string { return fmt.Sprintf("0x%08x", uint32(t)) }
	this := "no"
	if ref == pel.SchemeRefDAG1 {
		this = "yes: SchemeRef_DAG_1, the scheme this implementation runs"
	}
	return []kv{
		{Key: "descriptor_id", Value: printable([]byte(d.DescriptorID))},
		{Key: "scheme_id", Value: printable([]byte(d.SchemeID))},
		{Key: "pel1_version", Value: fmt.Sprintf("%d", d.PEL1Version)},
		{Key: "program_type_tag", Value: tag(d.ProgramTag)},
		{Key: "trace_type_tag", Value: tag(d.TraceTag)},
		{Key: "result_type_tag", Value: tag(d.ResultTag)},
		{Key: "op_registry", Value: printable([]byte(d.OpRegistry))},
		{Key: "params_profile", Value: printable([]byte(d.ParamsProfile))},
		{Key: "global_params", Value: gp},
		{Key: "scheme_ref_dag_1", Value: this},
	}
}

// provView is one direction of an artifact's provenance.
type provView struct {
	Why        bool
	Error      string
	Items      []provItem
	Truncated  bool
	Omitted    int // runs met but not listed (MaxProvRuns)
	Unreadable []refView
}

type provItem struct {
	Depth int
	Self  bool
	Ref   refView
	Runs  []provRun
}

type provRun struct {
	Edge refView
	Ends []endpointView
}

// provView walks ProvDepth edges back (why) or forward (uses) from ref.
// Artifacts that no further run produced (why) or used (uses) are not
// listed on their own: they appear as the ends of the runs that name them.
func (h *handler) provView(ctx context.Context, ref asl.Reference, why bool) provView {
	pv := provView{Why: why}
	walk := tgk.Uses
	if why {
		walk = tgk.Why
	}
	g, err := walk(ctx, h.s, ref, ProvDepth)
	switch {
	case errors.Is(err, tgk.ErrNoIndex):
		pv.Error = "This store keeps no provenance index."
		return pv
	case err != nil:
		pv.Error = "The provenance index cannot be read: " + errText(err)
		return pv
	}
	listed := make(map[asl.Reference]bool)
	full := false
	for _, r := range g.Order {
		via := g.Via[r]
		if len(via) == 0 && r != ref {
			continue
		}
		it := provItem{Depth: g.Depth[r], Self: r == ref, Ref: h.refView(r)}
		for _, e := range via {
			if len(listed) == MaxProvRuns && !listed[e] {
				full = true
				break
			}
			listed[e] = true
			edge := g.Edges[e]
			eps := edge.From
			if !why {
				eps = edge.To
			}
			it.Runs = append(it.Runs, provRun{Edge: h.refView(e), Ends: h.endpoints(eps)})
		}
		if it.Self || len(it.Runs) > 0 {
			pv.Items = append(pv.Items, it)
		}
		if full {
			pv.Omitted = len(g.Edges) - len(listed)
			break
		}
	}
	pv.Truncated = g.Truncated
	pv.Unreadable = h.refViews(g.Unreadable)
	return pv
}
