package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/trace"
)

// The trace vector kinds (SPECS.md §13, ENC/PEL-TRACE-DAG/1).
const (
	// trace_encode: {"trace":traceVec} -> {"trace_bytes":hex,"reference":text},
	// the SHA-256 reference of the trace artifact (tag 0x00000102).
	KindTraceEncode = "trace_encode"
	// trace_decode: {"trace_bytes":hex} -> {"trace":traceVec} or
	// {"reject":Reject}.
	KindTraceDecode = "trace_decode"
)

func init() {
	Register(KindTraceEncode, checkTraceEncode)
	Register(KindTraceDecode, checkTraceDecode)
}

type traceInput struct {
	Trace *traceVec `json:"trace"`
}

type traceEncodeExpect struct {
	TraceBytes *Hex   `json:"trace_bytes"`
	Reference  string `json:"reference"`
}

type traceBytesInput struct {
	TraceBytes *Hex `json:"trace_bytes"`
}

type traceDecodeExpect struct {
	Trace  *traceVec `json:"trace,omitempty"`
	Reject *Reject   `json:"reject,omitempty"`
}

func checkTraceEncode(_ context.Context, v Vector) error {
	var in traceInput
	var exp traceEncodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.trace and expect.trace_bytes", in.Trace != nil && exp.TraceBytes != nil); err != nil {
		return err
	}
	t, err := in.Trace.trace()
	if err != nil {
		return err
	}
	b, err := trace.Encode(t)
	if err != nil {
		return fmt.Errorf("trace.Encode: %v", err)
	}
	if err := eqBytes("TraceBytes", b, *exp.TraceBytes); err != nil {
		return err
	}
	if ref := asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagPELTraceDAG1, b)); ref.String() != exp.Reference {
		return fmt.Errorf("trace reference = %s, want %s", ref, exp.Reference)
	}
	return nil
}

func checkTraceDecode(_ context.Context, v Vector) error {
	var in traceBytesInput
	var exp traceDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.trace_bytes", in.TraceBytes != nil); err != nil {
		return err
	}
	t, err := trace.Decode(*in.TraceBytes)
	if exp.Reject != nil {
		if exp.Trace != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject)
	}
	if err := need("expect.trace", exp.Trace != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	if err := eqTrace(t, *exp.Trace); err != nil {
		return err
	}
	back, err := trace.Encode(t)
	if err != nil {
		return err
	}
	return eqBytes("re-encoding", back, *in.TraceBytes)
}
