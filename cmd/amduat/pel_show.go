package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/trace"
)

func init() { addPELCommand(newPELShowCmd) }

// pelArtifactKind names the PEL artifact types show recognises by type tag.
func pelArtifactKind(a asl.Artifact) string {
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

func newPELShowCmd(a *app) *cobra.Command {
	var dot bool
	c := &cobra.Command{
		Use:   "show REF [--dot]",
		Short: "Render a program, result, trace or scheme descriptor",
		Long: `Render the artifact REF, recognised by its type tag: a program (0x00000101),
a trace (0x00000102), a surface result (0x00000103) or a scheme descriptor
(0x00000100). The text form is "key value" lines (see
SPECS.md §16.4); a result also shows the trace_ref of its trace,
found through the store (none when no trace names it).

With --json: a program is printed in the JSON program format on one line
(pel build reads it back); a result, trace or descriptor as one object with references in text
form, status names and diagnostic messages.

--dot prints the program DAG as Graphviz DOT (deterministic). For a trace, or
a result (through its trace), the program is drawn with each node's status:
green OK, red failed, grey dashed not evaluated. With --json, --dot prints
{"ref":"...","dot":"..."}.

REF naming an artifact of another type, or one that does not decode, is a
usage error (exit 2).`,
		Example: `  amduat pel show REF
  amduat pel show --dot RESULT_REF | dot -Tsvg > run.svg`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			ref, err := parseRef(args[0])
			if err != nil {
				return err
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			ctx := c.Context()
			art, err := asl.Get(ctx, s, ref, 0)
			if err != nil {
				return refErr(args[0], err)
			}
			kind := pelArtifactKind(art)
			if kind == "" {
				return fail(exitUsage, args[0], fmt.Errorf("not a PEL program, result, trace or scheme descriptor (type tag %s)", art.Header().TagString()))
			}
			var out []byte
			if dot {
				out, err = pelShowDOT(ctx, s, ref, art, kind)
				if err == nil && a.jsonOut {
					out, err = jsonLine(struct {
						Ref asl.Reference `json:"ref"`
						Dot string        `json:"dot"`
					}{ref, string(out)})
				}
			} else {
				out, err = pelShow(ctx, s, ref, art, kind, a.jsonOut)
			}
			if err != nil {
				return err
			}
			if _, err := a.stdout.Write(out); err != nil {
				return fail(exitIO, "stdout", err)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&dot, "dot", false, "render the program DAG as Graphviz DOT")
	return c
}

// jsonLine encodes v as one line of JSON without HTML escaping.
func jsonLine(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, fail(exitIO, "", err)
	}
	return b.Bytes(), nil
}

// undecodable reports an artifact whose bytes do not decode as its tag says.
func undecodable(ref asl.Reference, kind string, err error) error {
	return fail(exitUsage, ref.String(), fmt.Errorf("%s artifact does not decode: %w", kind, err))
}

func pelShow(ctx context.Context, s asl.Store, ref asl.Reference, art asl.Artifact, kind string, asJSON bool) ([]byte, error) {
	var b bytes.Buffer
	switch kind {
	case "program":
		p, err := pel.DecodeProgramArtifact(art)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		if asJSON {
			return programJSONLine(p)
		}
		writeProgramText(&b, ref, art, p, nil)
	case "result":
		res, err := surf.DecodeResultArtifact(art)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		tref, found, err := findTrace(ctx, s, ref)
		if err != nil {
			return nil, err
		}
		if asJSON {
			return jsonLine(resultShowJSON(ref, res, refPtr(tref, found)))
		}
		writeResultText(&b, ref, res, refPtr(tref, found))
	case "trace":
		t, err := trace.DecodeArtifact(art)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		if asJSON {
			return jsonLine(traceShowJSON(ref, t))
		}
		writeTraceText(&b, ref, t)
	case "scheme_descriptor":
		d, err := pel.DecodeDescriptor(art.Bytes)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		if asJSON {
			return jsonLine(descriptorShowJSON(ref, d))
		}
		writeDescriptorText(&b, ref, d)
	}
	return b.Bytes(), nil
}

// programJSONLine renders p in the JSON program format (§15) on one line,
// as every --json output is: ProgramToJSON's text without its line breaks.
func programJSONLine(p pel.Program) ([]byte, error) {
	j, err := pel.ProgramToJSON(p, nil)
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

// findTrace looks up the trace of a result; found is false when no stored
// trace names it.
func findTrace(ctx context.Context, s asl.Store, resultRef asl.Reference) (asl.Reference, bool, error) {
	tref, err := surf.FindTrace(ctx, s, resultRef)
	switch {
	case errors.Is(err, surf.ErrNoTrace):
		return asl.Reference{}, false, nil
	case err != nil:
		return asl.Reference{}, false, failAuto(resultRef.String(), err)
	}
	return tref, true, nil
}

func pelShowDOT(ctx context.Context, s asl.Store, ref asl.Reference, art asl.Artifact, kind string) ([]byte, error) {
	switch kind {
	case "program":
		p, err := pel.DecodeProgramArtifact(art)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		return programDOT(p, "program "+ref.String(), nil), nil
	case "trace":
		t, err := trace.DecodeArtifact(art)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		return traceDOT(ctx, s, "trace "+ref.String(), t)
	case "result":
		if _, err := surf.DecodeResultArtifact(art); err != nil {
			return nil, undecodable(ref, kind, err)
		}
		tref, found, err := findTrace(ctx, s, ref)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fail(exitNotFound, ref.String(), fmt.Errorf("no stored trace names this result: %w", surf.ErrNoTrace))
		}
		t, err := surf.LoadTrace(ctx, s, tref)
		if err != nil {
			return nil, refErr(tref.String(), err)
		}
		return traceDOT(ctx, s, "result "+ref.String()+"\ntrace "+tref.String(), t)
	}
	return nil, fail(exitUsage, ref.String(), fmt.Errorf("--dot renders programs, traces and results, not a %s", kind))
}

func traceDOT(ctx context.Context, s asl.Store, title string, t trace.Trace) ([]byte, error) {
	pa, err := asl.Get(ctx, s, t.ProgramRef, 0)
	if err != nil {
		return nil, refErr(t.ProgramRef.String(), fmt.Errorf("program of the trace: %w", err))
	}
	p, err := pel.DecodeProgramArtifact(pa)
	if err != nil {
		return nil, undecodable(t.ProgramRef, "program", err)
	}
	return programDOT(p, title+"\nprogram "+t.ProgramRef.String(), &t), nil
}

// paramsText renders a node's params: the operation's readable JSON form
// when reg has one and the bytes decode, else raw hex. ok is false when
// there is nothing to show (empty params without a readable form).
func paramsText(reg *opreg.Registry, n pel.Node) (string, bool) {
	if op, found := reg.Lookup(n.Op); found && op.ParamsToJSON != nil {
		if v, err := op.DecodeParams(n.Params); err == nil {
			if j, err := op.ParamsToJSON(v); err == nil {
				return string(j), j != nil
			}
		} else {
			return "raw " + hex.EncodeToString(n.Params) + " (does not decode)", true
		}
	}
	if len(n.Params) == 0 {
		return "", false
	}
	return "raw " + hex.EncodeToString(n.Params), true
}

// writeProgramText renders a program: its nodes with inputs and params,
// its roots, and whether it is valid for reg (nil: the kernel) with its
// canonical order.
func writeProgramText(w io.Writer, ref asl.Reference, art asl.Artifact, p pel.Program, reg *opreg.Registry) {
	if reg == nil {
		reg = opreg.Kernel()
	}
	fmt.Fprintf(w, "program %s\n", ref)
	fmt.Fprintf(w, "type_tag %s size %d\n", tagText(art.Tag), len(art.Bytes))
	fmt.Fprintf(w, "nodes %d roots %d\n", len(p.Nodes), len(p.Roots))
	for _, n := range p.Nodes {
		fmt.Fprintf(w, "node %d %s\n", n.ID, printableText([]byte(n.Op.String())))
		for j, in := range n.Inputs {
			if in.Kind == pel.InputExternal {
				fmt.Fprintf(w, "  in[%d] input %d\n", j, in.InputIndex)
			} else {
				fmt.Fprintf(w, "  in[%d] node %d output %d\n", j, in.NodeID, in.OutputIndex)
			}
		}
		if t, ok := paramsText(reg, n); ok {
			fmt.Fprintf(w, "  params %s\n", t)
		}
	}
	for k, r := range p.Roots {
		fmt.Fprintf(w, "root[%d] node %d output %d\n", k, r.NodeID, r.OutputIndex)
	}
	pl, err := pel.Prepare(p, reg)
	if err != nil {
		var pe *pel.ProgramError
		if errors.As(err, &pe) {
			fmt.Fprintf(w, "valid no: code 0x%08x %s\n", pe.Code, printableText([]byte(pe.Message)))
		} else {
			fmt.Fprintf(w, "valid no: %s\n", oneLine(err.Error()))
		}
		return
	}
	fmt.Fprintf(w, "valid yes\norder")
	for _, id := range pl.Order() {
		fmt.Fprintf(w, " %d", id)
	}
	fmt.Fprintln(w)
}

func writeResultText(w io.Writer, ref asl.Reference, r surf.Result, traceRef *asl.Reference) {
	v := r.Value
	fmt.Fprintf(w, "result %s\n", ref)
	fmt.Fprintf(w, "program_ref %s\n", r.ProgramRef)
	writeRefLines(w, "", "input_ref", r.InputRefs)
	fmt.Fprintf(w, "params_ref %s\n", optionalRefText(r.ParamsRef, r.HasParams))
	if r.Limits == (pel.Limits{}) {
		fmt.Fprintln(w, "limits none")
	} else {
		fmt.Fprintf(w, "limits max_nodes %d max_output_bytes %d\n", r.Limits.MaxNodes, r.Limits.MaxOutputBytes)
	}
	fmt.Fprintf(w, "scheme_ref %s\n", v.SchemeRef)
	fmt.Fprintf(w, "pel1_version %d\n", v.PEL1Version)
	fmt.Fprintf(w, "status %s status_code %d kind %s\n", v.Status, v.Summary.StatusCode, v.Summary.Kind)
	writeRefLines(w, "", "output_ref", r.OutputRefs)
	writeDiagLines(w, "", v.Diagnostics)
	if r.HasStoreFailure {
		fmt.Fprintln(w, storeFailureLine(r.StoreFailure))
	}
	if traceRef != nil {
		fmt.Fprintf(w, "trace_ref %s\n", *traceRef)
	} else {
		fmt.Fprintln(w, "trace_ref none")
	}
}

func writeTraceText(w io.Writer, ref asl.Reference, t trace.Trace) {
	fmt.Fprintf(w, "trace %s\n", ref)
	fmt.Fprintf(w, "scheme_ref %s\n", t.SchemeRef)
	fmt.Fprintf(w, "program_ref %s\n", t.ProgramRef)
	writeRefLines(w, "", "input_ref", t.InputRefs)
	fmt.Fprintf(w, "params_ref %s\n", optionalRefText(t.ParamsRef, t.HasParams))
	fmt.Fprintf(w, "exec_result_ref %s\n", t.ExecResultRef)
	fmt.Fprintf(w, "status %s status_code %d\n", t.Status, t.StatusCode)
	fmt.Fprintf(w, "nodes %d\n", len(t.Nodes))
	for _, n := range t.Nodes {
		fmt.Fprintf(w, "node %d %s status %s status_code %d\n", n.NodeID, printableText([]byte(n.Op.String())), n.Status, n.StatusCode)
		writeRefLines(w, "  ", "output_ref", n.OutputRefs)
		writeDiagLines(w, "  ", n.Diagnostics)
	}
}

func globalParamsName(v uint8) string {
	switch v {
	case pel.GlobalParamsIgnored:
		return "ignored"
	case pel.GlobalParamsExposed:
		return "exposed"
	}
	return fmt.Sprintf("0x%02x", v)
}

func writeDescriptorText(w io.Writer, ref asl.Reference, d pel.Descriptor) {
	fmt.Fprintf(w, "scheme_descriptor %s\n", ref)
	fmt.Fprintf(w, "descriptor_id %s\n", printableText([]byte(d.DescriptorID)))
	fmt.Fprintf(w, "scheme_id %s\n", printableText([]byte(d.SchemeID)))
	fmt.Fprintf(w, "pel1_version %d\n", d.PEL1Version)
	fmt.Fprintf(w, "program_type_tag %s\n", tagText(d.ProgramTag))
	fmt.Fprintf(w, "trace_type_tag %s\n", tagText(d.TraceTag))
	fmt.Fprintf(w, "result_type_tag %s\n", tagText(d.ResultTag))
	fmt.Fprintf(w, "op_registry %s\n", printableText([]byte(d.OpRegistry)))
	fmt.Fprintf(w, "params_profile %s\n", printableText([]byte(d.ParamsProfile)))
	fmt.Fprintf(w, "global_params %s\n", globalParamsName(d.GlobalParams))
	yes := "no"
	if ref == pel.SchemeRefDAG1 {
		yes = "yes"
	}
	fmt.Fprintf(w, "scheme_ref_dag_1 %s\n", yes)
}

type pelResultShowJSON struct {
	Type         string               `json:"type"`
	Ref          asl.Reference        `json:"ref"`
	ProgramRef   asl.Reference        `json:"program_ref"`
	InputRefs    []asl.Reference      `json:"input_refs"`
	ParamsRef    *asl.Reference       `json:"params_ref"`
	Limits       *pelLimitsJSON       `json:"limits"`
	SchemeRef    asl.Reference        `json:"scheme_ref"`
	PEL1Version  uint16               `json:"pel1_version"`
	Status       string               `json:"status"`
	StatusCode   uint32               `json:"status_code"`
	ErrorKind    string               `json:"error_kind"`
	OutputRefs   []asl.Reference      `json:"output_refs"`
	Diagnostics  []pelDiagJSON        `json:"diagnostics"`
	StoreFailure *pelStoreFailureJSON `json:"store_failure"`
	TraceRef     *asl.Reference       `json:"trace_ref"`
}

// pelLimitsJSON is a result's deterministic bounds; null when unbounded.
type pelLimitsJSON struct {
	MaxNodes       uint64 `json:"max_nodes"`
	MaxOutputBytes uint64 `json:"max_output_bytes"`
}

func resultShowJSON(ref asl.Reference, r surf.Result, traceRef *asl.Reference) pelResultShowJSON {
	v := r.Value
	var lim *pelLimitsJSON
	if r.Limits != (pel.Limits{}) {
		lim = &pelLimitsJSON{MaxNodes: r.Limits.MaxNodes, MaxOutputBytes: r.Limits.MaxOutputBytes}
	}
	return pelResultShowJSON{
		Limits: lim,
		Type:   "result", Ref: ref, ProgramRef: r.ProgramRef, InputRefs: refList(r.InputRefs),
		ParamsRef: refPtr(r.ParamsRef, r.HasParams), SchemeRef: v.SchemeRef, PEL1Version: v.PEL1Version,
		Status: v.Status.String(), StatusCode: v.Summary.StatusCode, ErrorKind: v.Summary.Kind.String(),
		OutputRefs: refList(r.OutputRefs), Diagnostics: diagsJSON(v.Diagnostics),
		StoreFailure: storeFailureJSON(r), TraceRef: traceRef,
	}
}

type pelTraceNodeJSON struct {
	NodeID      uint32          `json:"node_id"`
	Op          string          `json:"op"`
	Version     uint32          `json:"version"`
	Status      string          `json:"status"`
	StatusCode  uint32          `json:"status_code"`
	OutputRefs  []asl.Reference `json:"output_refs"`
	Diagnostics []pelDiagJSON   `json:"diagnostics"`
}

type pelTraceShowJSON struct {
	Type          string             `json:"type"`
	Ref           asl.Reference      `json:"ref"`
	SchemeRef     asl.Reference      `json:"scheme_ref"`
	ProgramRef    asl.Reference      `json:"program_ref"`
	InputRefs     []asl.Reference    `json:"input_refs"`
	ParamsRef     *asl.Reference     `json:"params_ref"`
	ExecResultRef asl.Reference      `json:"exec_result_ref"`
	Status        string             `json:"status"`
	StatusCode    uint32             `json:"status_code"`
	Nodes         []pelTraceNodeJSON `json:"nodes"`
}

func traceShowJSON(ref asl.Reference, t trace.Trace) pelTraceShowJSON {
	j := pelTraceShowJSON{
		Type: "trace", Ref: ref, SchemeRef: t.SchemeRef, ProgramRef: t.ProgramRef, InputRefs: refList(t.InputRefs),
		ParamsRef: refPtr(t.ParamsRef, t.HasParams), ExecResultRef: t.ExecResultRef,
		Status: t.Status.String(), StatusCode: t.StatusCode, Nodes: make([]pelTraceNodeJSON, len(t.Nodes)),
	}
	for i, n := range t.Nodes {
		j.Nodes[i] = pelTraceNodeJSON{NodeID: uint32(n.NodeID), Op: n.Op.Name, Version: n.Op.Version,
			Status: n.Status.String(), StatusCode: n.StatusCode, OutputRefs: refList(n.OutputRefs),
			Diagnostics: diagsJSON(n.Diagnostics)}
	}
	return j
}

type pelDescriptorShowJSON struct {
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

func descriptorShowJSON(ref asl.Reference, d pel.Descriptor) pelDescriptorShowJSON {
	return pelDescriptorShowJSON{
		Type: "scheme_descriptor", Ref: ref, DescriptorID: d.DescriptorID, SchemeID: d.SchemeID,
		PEL1Version: d.PEL1Version, ProgramTypeTag: tagText(d.ProgramTag), TraceTypeTag: tagText(d.TraceTag),
		ResultTypeTag: tagText(d.ResultTag), OpRegistry: d.OpRegistry, ParamsProfile: d.ParamsProfile,
		GlobalParams: globalParamsName(d.GlobalParams), SchemeRefDAG1: ref == pel.SchemeRefDAG1,
	}
}
