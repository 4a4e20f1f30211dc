package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/trace"
)

func init() { addPELCommand(newPELShowCmd) }

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
			ref, err := a.parseRef(args[0])
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
			kind := report.Kind(art)
			if kind == "" {
				return fail(exitUsage, args[0], fmt.Errorf("not a PEL program, result, trace or scheme descriptor (type tag %s)", art.Header().TagString()))
			}
			reg, done, err := staticOps(ctx)
			if err != nil {
				return err
			}
			defer done()
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
				out, err = pelShow(ctx, s, ref, art, kind, a.jsonOut, reg)
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
	b, err := report.Line(v)
	if err != nil {
		return nil, fail(exitIO, "", err)
	}
	return b, nil
}

// undecodable reports an artifact whose bytes do not decode as its tag says.
func undecodable(ref asl.Reference, kind string, err error) error {
	return fail(exitUsage, ref.String(), fmt.Errorf("%s artifact does not decode: %w", kind, err))
}

// showErr turns report.ShowJSON's errors into the command's: bytes that do
// not decode are a usage error (exit 2), store errors keep their class.
func showErr(ref asl.Reference, err error) error {
	var ue *report.UndecodableError
	if errors.As(err, &ue) {
		return undecodable(ue.Ref, ue.Kind, ue.Err)
	}
	return failAuto(ref.String(), err)
}

func pelShow(ctx context.Context, s asl.Store, ref asl.Reference, art asl.Artifact, kind string, asJSON bool, reg *opreg.Registry) ([]byte, error) {
	if asJSON {
		out, err := report.ShowJSON(ctx, s, ref, art, reg)
		if err != nil {
			return nil, showErr(ref, err)
		}
		return out, nil
	}
	var b bytes.Buffer
	switch kind {
	case "program":
		p, err := pel.DecodeProgramArtifact(art)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		writeProgramText(&b, ref, art, p, reg)
	case "result":
		res, err := surf.DecodeResultArtifact(art)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		tref, found, err := findTrace(ctx, s, ref)
		if err != nil {
			return nil, err
		}
		writeResultText(&b, ref, res, report.RefPtr(tref, found))
	case "trace":
		t, err := trace.DecodeArtifact(art)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		writeTraceText(&b, ref, t)
	case "scheme_descriptor":
		d, err := pel.DecodeDescriptor(art.Bytes)
		if err != nil {
			return nil, undecodable(ref, kind, err)
		}
		writeDescriptorText(&b, ref, d)
	}
	return b.Bytes(), nil
}

// findTrace is report.FindTrace with the command's error classes.
func findTrace(ctx context.Context, s asl.Store, resultRef asl.Reference) (asl.Reference, bool, error) {
	tref, found, err := report.FindTrace(ctx, s, resultRef)
	if err != nil {
		return asl.Reference{}, false, failAuto(resultRef.String(), err)
	}
	return tref, found, nil
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
	fmt.Fprintf(w, "type_tag %s size %d\n", report.TagText(art.Tag), len(art.Bytes))
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
	fmt.Fprintf(w, "status %s status_code 0x%08x kind %s\n", v.Status, v.Summary.StatusCode, v.Summary.Kind)
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
	fmt.Fprintf(w, "status %s status_code 0x%08x\n", t.Status, t.StatusCode)
	fmt.Fprintf(w, "nodes %d\n", len(t.Nodes))
	for _, n := range t.Nodes {
		fmt.Fprintf(w, "node %d %s status %s status_code 0x%08x\n", n.NodeID, printableText([]byte(n.Op.String())), n.Status, n.StatusCode)
		writeRefLines(w, "  ", "output_ref", n.OutputRefs)
		writeDiagLines(w, "  ", n.Diagnostics)
	}
}

func writeDescriptorText(w io.Writer, ref asl.Reference, d pel.Descriptor) {
	fmt.Fprintf(w, "scheme_descriptor %s\n", ref)
	fmt.Fprintf(w, "descriptor_id %s\n", printableText([]byte(d.DescriptorID)))
	fmt.Fprintf(w, "scheme_id %s\n", printableText([]byte(d.SchemeID)))
	fmt.Fprintf(w, "pel1_version %d\n", d.PEL1Version)
	fmt.Fprintf(w, "program_type_tag %s\n", report.TagText(d.ProgramTag))
	fmt.Fprintf(w, "trace_type_tag %s\n", report.TagText(d.TraceTag))
	fmt.Fprintf(w, "result_type_tag %s\n", report.TagText(d.ResultTag))
	fmt.Fprintf(w, "op_registry %s\n", printableText([]byte(d.OpRegistry)))
	fmt.Fprintf(w, "params_profile %s\n", printableText([]byte(d.ParamsProfile)))
	fmt.Fprintf(w, "global_params %s\n", report.GlobalParamsName(d.GlobalParams))
	yes := "no"
	if ref == pel.SchemeRefDAG1 {
		yes = "yes"
	}
	fmt.Fprintf(w, "scheme_ref_dag_1 %s\n", yes)
}
