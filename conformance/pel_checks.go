package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// The PEL vector kinds (SPECS.md §4, §8-§12). Their JSON shapes are the
// structs below (see pel_vec.go for the shared value forms) and
// SPECS.md §7.9.
const (
	// program_encode: {"program":programVec} -> {"program_bytes":hex,
	// "reference":text}, the SHA-256 reference of the program artifact
	// (ProgramBytes tagged 0x00000101).
	KindProgramEncode = "program_encode"
	// program_decode: {"program_bytes":hex} -> {"program":programVec} or
	// {"reject":Reject,"diagnostic_code":N}, N the code Exec_DAG reports
	// (2 malformed, 3 duplicate node id, 4 node order).
	KindProgramDecode = "program_decode"
	// canonical_order: {"program":programVec} -> {"order":[node ids]} or
	// {"invalid":diagVec}, the structural diagnostic (§3, §4.1, §12.3).
	KindCanonicalOrder = "canonical_order"
	// exec_dag: {"program":artifact,"inputs":[artifact],"params":artifact|null,
	// "limits"?:{"max_nodes","max_output_bytes"}} -> {"status":NAME,"status_code":N,"kind":NAME,"outputs":[artifact],
	// "diagnostics":[diagVec],"nodes":[{"id","status","status_code"}],
	// "result_value":hex}, with the kernel registry (§12, limits §12.6).
	KindExecDAG = "exec_dag"
	// result_value_encode: {"value":valueVec} -> {"value_bytes":hex}.
	KindResultValueEncode = "result_value_encode"
	// result_value_decode: {"value_bytes":hex} -> {"value":valueVec} or
	// {"reject":Reject}.
	KindResultValueDecode = "result_value_decode"
	// descriptor_encode: {"descriptor":descriptorVec} ->
	// {"descriptor_bytes":hex,"reference":text} (tag 0x00000100, SHA-256).
	KindDescriptorEncode = "descriptor_encode"
	// descriptor_decode: {"descriptor_bytes":hex} -> {"descriptor":...} or
	// {"reject":Reject}.
	KindDescriptorDecode = "descriptor_decode"
	// scheme_ref_dag1: {} -> {"type_tag":N,"descriptor_bytes":hex,
	// "scheme_ref":text}: this implementation's SchemeRef_DAG_1 (§10).
	KindSchemeRefDAG1 = "scheme_ref_dag1"
)

func init() {
	Register(KindProgramEncode, checkProgramEncode)
	Register(KindProgramDecode, checkProgramDecode)
	Register(KindCanonicalOrder, checkCanonicalOrder)
	Register(KindExecDAG, checkExecDAG)
	Register(KindResultValueEncode, checkResultValueEncode)
	Register(KindResultValueDecode, checkResultValueDecode)
	Register(KindDescriptorEncode, checkDescriptorEncode)
	Register(KindDescriptorDecode, checkDescriptorDecode)
	Register(KindSchemeRefDAG1, checkSchemeRefDAG1)
}

type programInput struct {
	Program *programVec `json:"program"`
}

type programEncodeExpect struct {
	ProgramBytes *Hex   `json:"program_bytes"`
	Reference    string `json:"reference"`
}

type programBytesInput struct {
	ProgramBytes *Hex `json:"program_bytes"`
}

type programDecodeExpect struct {
	Program        *programVec `json:"program,omitempty"`
	Reject         *Reject     `json:"reject,omitempty"`
	DiagnosticCode *uint32     `json:"diagnostic_code,omitempty"`
}

func checkProgramEncode(_ context.Context, v Vector) error {
	var in programInput
	var exp programEncodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.program and expect.program_bytes", in.Program != nil && exp.ProgramBytes != nil); err != nil {
		return err
	}
	p, err := in.Program.program()
	if err != nil {
		return err
	}
	b, err := pel.EncodeProgram(p)
	if err != nil {
		return fmt.Errorf("EncodeProgram: %v", err)
	}
	if err := eqBytes("ProgramBytes", b, *exp.ProgramBytes); err != nil {
		return err
	}
	art, err := pel.ProgramArtifact(p)
	if err != nil {
		return err
	}
	if ref := asl.MustDerive(asl.HashSHA256, art); ref.String() != exp.Reference {
		return fmt.Errorf("program reference = %s, want %s", ref, exp.Reference)
	}
	return nil
}

func checkProgramDecode(_ context.Context, v Vector) error {
	var in programBytesInput
	var exp programDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.program_bytes", in.ProgramBytes != nil); err != nil {
		return err
	}
	p, err := pel.DecodeProgram(*in.ProgramBytes)
	if exp.Reject != nil {
		if exp.Program != nil || exp.DiagnosticCode == nil {
			return errors.New("bad vector: a rejection needs diagnostic_code and no program")
		}
		if err := CheckReject(err, exp.Reject); err != nil {
			return err
		}
		var pe *pel.ProgramError
		if !errors.As(err, &pe) || pe.Code != *exp.DiagnosticCode {
			return fmt.Errorf("rejected with %v, want diagnostic code 0x%08x", err, *exp.DiagnosticCode)
		}
		return nil
	}
	if err := need("expect.program", exp.Program != nil && exp.DiagnosticCode == nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	want, err := exp.Program.program()
	if err != nil {
		return err
	}
	if !p.Equal(want) {
		return fmt.Errorf("decoded %+v, want %+v", programToVec(p), *exp.Program)
	}
	back, err := pel.EncodeProgram(p)
	if err != nil {
		return err
	}
	return eqBytes("re-encoding", back, *in.ProgramBytes)
}

type orderExpect struct {
	Order   *[]uint32 `json:"order,omitempty"` // an empty order is written "order": []
	Invalid *diagVec  `json:"invalid,omitempty"`
}

func checkCanonicalOrder(_ context.Context, v Vector) error {
	var in programInput
	var exp orderExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.program", in.Program != nil); err != nil {
		return err
	}
	p, err := in.Program.program()
	if err != nil {
		return err
	}
	order, err := pel.CanonicalOrder(p)
	if exp.Invalid != nil {
		if exp.Order != nil {
			return errors.New("bad vector: order together with invalid")
		}
		var pe *pel.ProgramError
		if !errors.As(err, &pe) {
			return fmt.Errorf("CanonicalOrder = %v, %v; want the structural diagnostic 0x%08x", order, err, exp.Invalid.Code)
		}
		return eqDiags("structural diagnostic", []pel.DiagnosticEntry{pe.Diagnostic()}, []diagVec{*exp.Invalid})
	}
	if err != nil {
		return fmt.Errorf("CanonicalOrder: %v", err)
	}
	got := make([]uint32, len(order))
	for i, id := range order {
		got[i] = uint32(id)
	}
	if err := need("expect.order", exp.Order != nil); err != nil {
		return err
	}
	if !slices.Equal(got, *exp.Order) {
		return fmt.Errorf("canonical order = %v, want %v", got, *exp.Order)
	}
	// Prepare computes the same order (and the program is valid for the
	// kernel in every order vector).
	pl, err := pel.Prepare(p, nil)
	if err != nil {
		return fmt.Errorf("Prepare: %v", err)
	}
	if plo := pl.Order(); !slices.Equal(plo, order) {
		return fmt.Errorf("Plan.Order = %v, CanonicalOrder = %v", plo, order)
	}
	return nil
}

type execInput struct {
	Program *artifactJSON  `json:"program"`
	Inputs  []artifactJSON `json:"inputs"`
	Params  *artifactJSON  `json:"params"`
	Limits  *limitsVec     `json:"limits,omitempty"`
	// Registry names the operation registry (§7.9): absent for the kernel,
	// RegistryKernelTest for the kernel plus the test operations,
	// RegistryKernelWasm for the kernel plus amduat.wasm.run (§20).
	Registry string `json:"registry,omitempty"`
}

// RegistryKernelTest names the registry of the kernel plus the test
// operations of SPECS.md §7.9, for vectors the kernel cannot express.
const RegistryKernelTest = "kernel+test/1"

// TestOpZero is the test operation test.zero version 1 (SPECS.md §7.9): any
// number of inputs, empty params, no outputs, no runtime errors.
const TestOpZero = "test.zero"

// kernelTest is built on first use, not at package init.
var kernelTest = sync.OnceValue(func() *opreg.Registry {
	r, err := opreg.Kernel().Extend(opreg.Operation{
		ID: opreg.OperationID{Name: TestOpZero, Version: 1}, MinInputs: 0, MaxInputs: opreg.Unbounded,
		DecodeParams: func(b []byte) (any, error) {
			if len(b) != 0 {
				return nil, fmt.Errorf("%s params: %d bytes, want none: %w", TestOpZero, len(b), opreg.ErrParams)
			}
			return nil, nil
		},
		EncodeParams: func(any) ([]byte, error) { return []byte{}, nil },
		Run:          func(opreg.Call) ([]asl.Artifact, *opreg.OpError) { return []asl.Artifact{}, nil },
		OutputSize:   func(opreg.Call) (uint64, bool) { return 0, true },
	})
	if err != nil {
		panic(err)
	}
	return r
})

// vectorRegistry resolves an exec_dag vector's "registry" member.
func vectorRegistry(name string) (*opreg.Registry, error) {
	switch name {
	case "":
		return opreg.Kernel(), nil
	case RegistryKernelTest:
		return kernelTest(), nil
	case RegistryKernelWasm:
		regs, err := wasmRegistries()
		return regs[0], err
	}
	return nil, fmt.Errorf("unknown registry %q", name)
}

type nodeEventVec struct {
	ID         uint32 `json:"id"`
	Status     string `json:"status"`
	StatusCode uint32 `json:"status_code"`
}

type execExpect struct {
	Status      string         `json:"status"`
	StatusCode  *uint32        `json:"status_code"`
	Kind        string         `json:"kind"`
	Outputs     []artifactJSON `json:"outputs"`
	Diagnostics []diagVec      `json:"diagnostics"`
	Nodes       []nodeEventVec `json:"nodes"`
	ResultValue *Hex           `json:"result_value"`
}

func (in execInput) artifacts() (asl.Artifact, []asl.Artifact, *asl.Artifact, error) {
	if in.Program == nil {
		return asl.Artifact{}, nil, nil, errors.New("bad vector: input.program missing")
	}
	prog, err := in.Program.artifact()
	if err != nil {
		return asl.Artifact{}, nil, nil, err
	}
	inputs := make([]asl.Artifact, len(in.Inputs))
	for i, a := range in.Inputs {
		if inputs[i], err = a.artifact(); err != nil {
			return asl.Artifact{}, nil, nil, err
		}
	}
	var params *asl.Artifact
	if in.Params != nil {
		p, err := in.Params.artifact()
		if err != nil {
			return asl.Artifact{}, nil, nil, err
		}
		params = &p
	}
	return prog, inputs, params, nil
}

func eqArtifacts(what string, got []asl.Artifact, want []artifactJSON) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d artifacts, want %d", what, len(got), len(want))
	}
	for i := range got {
		w, err := want[i].artifact()
		if err != nil {
			return err
		}
		if got[i].HasTag != w.HasTag || got[i].Tag != w.Tag || string(got[i].Bytes) != string(w.Bytes) {
			return fmt.Errorf("%s[%d] = %s %x, want %s %x", what, i, got[i].Header().TagString(), got[i].Bytes, w.Header().TagString(), w.Bytes)
		}
	}
	return nil
}

func checkExecDAG(_ context.Context, v Vector) error {
	var in execInput
	var exp execExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("expect.status_code and result_value", exp.StatusCode != nil && exp.ResultValue != nil); err != nil {
		return err
	}
	prog, inputs, params, err := in.artifacts()
	if err != nil {
		return err
	}
	reg, err := vectorRegistry(in.Registry)
	if err != nil {
		return err
	}
	var events []pel.NodeEvent
	obs := pel.ObserverFunc(func(e pel.NodeEvent) { events = append(events, e) })
	var outs []asl.Artifact
	var res pel.ExecutionResultValue
	if in.Limits == nil {
		outs, res = pel.ExecDAG(reg, prog, inputs, params, obs)
	} else if outs, res, err = pel.ExecDAGWith(reg, prog, inputs, params, obs, pel.RunOptions{Limits: in.Limits.limits()}); err != nil {
		return fmt.Errorf("ExecDAGWith: %v", err)
	}
	if res.Status.String() != exp.Status || res.Summary.StatusCode != *exp.StatusCode || res.Summary.Kind.String() != exp.Kind {
		return fmt.Errorf("status %s status_code %d kind %s, want %s %d %s (diagnostics %v)",
			res.Status, res.Summary.StatusCode, res.Summary.Kind, exp.Status, *exp.StatusCode, exp.Kind, diagsToVec(res.Diagnostics))
	}
	if err := eqDiags("diagnostics", res.Diagnostics, exp.Diagnostics); err != nil {
		return err
	}
	if err := eqArtifacts("outputs", outs, exp.Outputs); err != nil {
		return err
	}
	if len(events) != len(exp.Nodes) {
		return fmt.Errorf("%d nodes evaluated, want %d", len(events), len(exp.Nodes))
	}
	for i, e := range events {
		w := exp.Nodes[i]
		if uint32(e.NodeID) != w.ID || e.Status.String() != w.Status || e.StatusCode != w.StatusCode {
			return fmt.Errorf("evaluation step %d: node %d %s %d, want node %d %s %d", i, e.NodeID, e.Status, e.StatusCode, w.ID, w.Status, w.StatusCode)
		}
	}
	rv, err := pel.EncodeResultValue(res)
	if err != nil {
		return fmt.Errorf("EncodeResultValue: %v", err)
	}
	if err := eqBytes("result_value", rv, *exp.ResultValue); err != nil {
		return err
	}
	// Exec_DAG is deterministic: a second run gives the same value bytes.
	_, again, err := pel.ExecDAGWith(reg, prog, inputs, params, nil, pel.RunOptions{Limits: in.Limits.limits()})
	if err != nil {
		return err
	}
	rv2, err := pel.EncodeResultValue(again)
	if err != nil {
		return err
	}
	if err := eqBytes("result_value of a second run", rv2, rv); err != nil {
		return err
	}
	// Registries with more than one engine (kernel+wasm/1: compiler and
	// interpreter) must agree on everything.
	alts, err := alternateRegistries(in.Registry)
	if err != nil {
		return err
	}
	for i, alt := range alts {
		outs2, res2, err := pel.ExecDAGWith(alt, prog, inputs, params, nil, pel.RunOptions{Limits: in.Limits.limits()})
		if err != nil {
			return fmt.Errorf("alternate engine %d: %v", i+1, err)
		}
		if err := eqArtifacts(fmt.Sprintf("outputs under alternate engine %d", i+1), outs2, exp.Outputs); err != nil {
			return err
		}
		rv3, err := pel.EncodeResultValue(res2)
		if err != nil {
			return err
		}
		if err := eqBytes(fmt.Sprintf("result_value under alternate engine %d", i+1), rv3, rv); err != nil {
			return err
		}
	}
	return nil
}

type valueInput struct {
	Value *valueVec `json:"value"`
}

type valueBytesJSON struct {
	ValueBytes *Hex `json:"value_bytes"`
}

type valueDecodeExpect struct {
	Value  *valueVec `json:"value,omitempty"`
	Reject *Reject   `json:"reject,omitempty"`
}

func checkResultValueEncode(_ context.Context, v Vector) error {
	var in valueInput
	var exp valueBytesJSON
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.value and expect.value_bytes", in.Value != nil && exp.ValueBytes != nil); err != nil {
		return err
	}
	val, err := in.Value.value()
	if err != nil {
		return err
	}
	b, err := pel.EncodeResultValue(val)
	if err != nil {
		return fmt.Errorf("EncodeResultValue: %v", err)
	}
	return eqBytes("value bytes", b, *exp.ValueBytes)
}

func checkResultValueDecode(_ context.Context, v Vector) error {
	var in valueBytesJSON
	var exp valueDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.value_bytes", in.ValueBytes != nil); err != nil {
		return err
	}
	val, err := pel.DecodeResultValue(*in.ValueBytes)
	if exp.Reject != nil {
		if exp.Value != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject)
	}
	if err := need("expect.value", exp.Value != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	if err := eqValue("value", val, *exp.Value); err != nil {
		return err
	}
	back, err := pel.EncodeResultValue(val)
	if err != nil {
		return err
	}
	return eqBytes("re-encoding", back, *in.ValueBytes)
}

// descriptorVec is a scheme descriptor (§10).
type descriptorVec struct {
	DescriptorID   string `json:"descriptor_id"`
	SchemeID       string `json:"scheme_id"`
	PEL1Version    uint16 `json:"pel1_version"`
	ProgramTypeTag uint32 `json:"program_type_tag"`
	TraceTypeTag   uint32 `json:"trace_type_tag"`
	ResultTypeTag  uint32 `json:"result_type_tag"`
	OpRegistry     string `json:"op_registry"`
	ParamsProfile  string `json:"params_profile"`
	GlobalParams   uint8  `json:"global_params"`
}

func descriptorToVec(d pel.Descriptor) descriptorVec {
	return descriptorVec{DescriptorID: d.DescriptorID, SchemeID: d.SchemeID, PEL1Version: d.PEL1Version,
		ProgramTypeTag: uint32(d.ProgramTag), TraceTypeTag: uint32(d.TraceTag), ResultTypeTag: uint32(d.ResultTag),
		OpRegistry: d.OpRegistry, ParamsProfile: d.ParamsProfile, GlobalParams: d.GlobalParams}
}

func (v descriptorVec) descriptor() pel.Descriptor {
	return pel.Descriptor{DescriptorID: v.DescriptorID, SchemeID: v.SchemeID, PEL1Version: v.PEL1Version,
		ProgramTag: asl.TypeTag(v.ProgramTypeTag), TraceTag: asl.TypeTag(v.TraceTypeTag), ResultTag: asl.TypeTag(v.ResultTypeTag),
		OpRegistry: v.OpRegistry, ParamsProfile: v.ParamsProfile, GlobalParams: v.GlobalParams}
}

type descriptorInput struct {
	Descriptor *descriptorVec `json:"descriptor"`
}

type descriptorEncodeExpect struct {
	DescriptorBytes *Hex   `json:"descriptor_bytes"`
	Reference       string `json:"reference"`
}

type descriptorBytesInput struct {
	DescriptorBytes *Hex `json:"descriptor_bytes"`
}

type descriptorDecodeExpect struct {
	Descriptor *descriptorVec `json:"descriptor,omitempty"`
	Reject     *Reject        `json:"reject,omitempty"`
}

func checkDescriptorEncode(_ context.Context, v Vector) error {
	var in descriptorInput
	var exp descriptorEncodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.descriptor and expect.descriptor_bytes", in.Descriptor != nil && exp.DescriptorBytes != nil); err != nil {
		return err
	}
	b := pel.EncodeDescriptor(in.Descriptor.descriptor())
	if err := eqBytes("DescriptorBytes", b, *exp.DescriptorBytes); err != nil {
		return err
	}
	if ref := asl.MustDerive(asl.HashSHA256, asl.Tagged(pel.TagSchemeDescriptor, b)); ref.String() != exp.Reference {
		return fmt.Errorf("descriptor reference = %s, want %s", ref, exp.Reference)
	}
	return nil
}

func checkDescriptorDecode(_ context.Context, v Vector) error {
	var in descriptorBytesInput
	var exp descriptorDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.descriptor_bytes", in.DescriptorBytes != nil); err != nil {
		return err
	}
	d, err := pel.DecodeDescriptor(*in.DescriptorBytes)
	if exp.Reject != nil {
		if exp.Descriptor != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject)
	}
	if err := need("expect.descriptor", exp.Descriptor != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	if got := descriptorToVec(d); got != *exp.Descriptor {
		return fmt.Errorf("decoded %+v, want %+v", got, *exp.Descriptor)
	}
	return eqBytes("re-encoding", pel.EncodeDescriptor(d), *in.DescriptorBytes)
}

type schemeRefExpect struct {
	TypeTag         *uint32 `json:"type_tag"`
	DescriptorBytes *Hex    `json:"descriptor_bytes"`
	SchemeRef       string  `json:"scheme_ref"`
}

func checkSchemeRefDAG1(_ context.Context, v Vector) error {
	var in struct{}
	var exp schemeRefExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("expect.type_tag and descriptor_bytes", exp.TypeTag != nil && exp.DescriptorBytes != nil); err != nil {
		return err
	}
	d := pel.SchemeDescriptor()
	if !d.HasTag || uint32(d.Tag) != *exp.TypeTag {
		return fmt.Errorf("descriptor type tag %s, want 0x%08x", d.Header().TagString(), *exp.TypeTag)
	}
	if err := eqBytes("descriptor bytes", d.Bytes, *exp.DescriptorBytes); err != nil {
		return err
	}
	if pel.SchemeRefDAG1.String() != exp.SchemeRef {
		return fmt.Errorf("SchemeRef_DAG_1 = %s, want %s", pel.SchemeRefDAG1, exp.SchemeRef)
	}
	if ref := asl.MustDerive(asl.HashSHA256, d); ref != pel.SchemeRefDAG1 {
		return fmt.Errorf("SchemeRef_DAG_1 %s is not the reference %s of the descriptor", pel.SchemeRefDAG1, ref)
	}
	return nil
}
