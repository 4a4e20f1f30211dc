package pel

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
)

// TagSchemeDescriptor is the type tag of the PEL/PROGRAM-DAG-DESC/1
// descriptor artifact (SPECS.md §10). The value is this project's own: the
// published documents do not give it.
const TagSchemeDescriptor asl.TypeTag = 0x00000100

// Global params policies a descriptor can declare.
const (
	// GlobalParamsIgnored: Exec_DAG ignores the params argument.
	GlobalParamsIgnored uint8 = 0x00
	// GlobalParamsExposed: operations that need it (pel.bytes.params) read
	// the params argument; absent params make them INVALID_INPUTS.
	GlobalParamsExposed uint8 = 0x01
)

// Descriptor is the value of a scheme descriptor artifact (SPECS.md §10).
type Descriptor struct {
	DescriptorID  string // "PEL/PROGRAM-DAG-DESC/1"
	SchemeID      string // "PEL/PROGRAM-DAG/1"
	PEL1Version   uint16
	ProgramTag    asl.TypeTag
	TraceTag      asl.TypeTag
	ResultTag     asl.TypeTag
	OpRegistry    string // "OPREG/PEL1-KERNEL"
	ParamsProfile string // "OPREG/PEL1-KERNEL-PARAMS/1"
	GlobalParams  uint8
}

// DescriptorDAG1 is the descriptor whose reference is SchemeRefDAG1.
var DescriptorDAG1 = Descriptor{
	DescriptorID:  "PEL/PROGRAM-DAG-DESC/1",
	SchemeID:      "PEL/PROGRAM-DAG/1",
	PEL1Version:   PEL1Version,
	ProgramTag:    asl.TagPELProgramDAG1,
	TraceTag:      asl.TagPELTraceDAG1,
	ResultTag:     asl.TagPEL1Result1,
	OpRegistry:    "OPREG/PEL1-KERNEL",
	ParamsProfile: "OPREG/PEL1-KERNEL-PARAMS/1",
	GlobalParams:  GlobalParamsExposed,
}

// EncodeDescriptor returns DescriptorBytes (SPECS.md §10):
//
//	descriptor_id bytes32 || scheme_id bytes32 || pel1_version u16 ||
//	program_type_tag u32 || trace_type_tag u32 || result_type_tag u32 ||
//	op_registry bytes32 || params_profile bytes32 || global_params u8
func EncodeDescriptor(d Descriptor) []byte {
	var w enc.Writer
	w.Bytes32([]byte(d.DescriptorID))
	w.Bytes32([]byte(d.SchemeID))
	w.U16(d.PEL1Version)
	w.U32(uint32(d.ProgramTag))
	w.U32(uint32(d.TraceTag))
	w.U32(uint32(d.ResultTag))
	w.Bytes32([]byte(d.OpRegistry))
	w.Bytes32([]byte(d.ParamsProfile))
	w.U8(d.GlobalParams)
	return w.Buf
}

// DecodeDescriptor parses DescriptorBytes strictly: truncation, lengths
// past the end, a global_params flag other than 0x00 and 0x01, and trailing
// bytes are rejected. Any well-formed descriptor decodes, including ones for
// other schemes; compare with DescriptorDAG1 to recognise this scheme.
func DecodeDescriptor(b []byte) (Descriptor, error) {
	r := enc.NewReader(b)
	var d Descriptor
	d.DescriptorID = string(r.Bytes32("descriptor_id"))
	d.SchemeID = string(r.Bytes32("scheme_id"))
	d.PEL1Version = r.U16("pel1_version")
	d.ProgramTag = asl.TypeTag(r.U32("program_type_tag"))
	d.TraceTag = asl.TypeTag(r.U32("trace_type_tag"))
	d.ResultTag = asl.TypeTag(r.U32("result_type_tag"))
	d.OpRegistry = string(r.Bytes32("op_registry"))
	d.ParamsProfile = string(r.Bytes32("params_profile"))
	off := r.Offset()
	d.GlobalParams = r.U8("global_params")
	if r.Err() == nil && d.GlobalParams > GlobalParamsExposed {
		r.FailAt(off, "global_params", "value 0x%02x is neither 0x00 nor 0x01", d.GlobalParams)
	}
	if err := r.Done(); err != nil {
		return Descriptor{}, fmt.Errorf("scheme descriptor: %w", err)
	}
	return d, nil
}

// SchemeDescriptor returns the PEL/PROGRAM-DAG-DESC/1 descriptor artifact:
// EncodeDescriptor(DescriptorDAG1) tagged TagSchemeDescriptor.
func SchemeDescriptor() asl.Artifact {
	return asl.Tagged(TagSchemeDescriptor, EncodeDescriptor(DescriptorDAG1))
}

// SchemeRefDAG1 is SchemeRef_DAG_1: the HASH-ASL1-256 (SHA-256) Reference of
// SchemeDescriptor() (SPECS.md §10). Every ExecutionResultValue Exec_DAG
// produces carries it.
var SchemeRefDAG1 = asl.MustDerive(asl.HashSHA256, SchemeDescriptor())
