package conformance

import (
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

// The trace case table (§13): the traces of real surface runs, encoded and
// decoded, and rejections of malformed TraceBytes.

const (
	specTrace    = "§13.2"
	specTraceDec = "§13.3"
)

func init() { RegisterGenerator("trace.codec", genTraceCodec) }

// traceRuns names the surface cases whose traces become vectors.
var traceRuns = []string{
	"ok.const-hash", "ok.concat", "ok.params", "ok.blake3", "invalid-program.missing", "invalid-program.unknown-op",
	"invalid-program.root-output-index", "invalid-inputs.index-out-of-range", "invalid-inputs.params-not-given",
	"runtime-failed.slice", "runtime-failed.max-nodes", "scheme-unsupported.other",
}

// rawTraceNode is one NodeRecord written field by field.
type rawTraceNode struct {
	id      uint32
	name    string
	version uint32
	status  byte
	code    uint32
	outputs []asl.Reference
	diags   []pel.DiagnosticEntry
}

func (n rawTraceNode) bytes() []byte {
	w := enc.Writer{}
	w.U32(n.id)
	w.Bytes32([]byte(n.name))
	w.U32(n.version)
	w.U8(n.status)
	w.U32(n.code)
	w.U32(uint32(len(n.outputs)))
	for _, r := range n.outputs {
		w.Buf = asl.AppendEncodedRef(w.Buf, r)
	}
	w.Buf = pel.AppendDiagnostics(w.Buf, n.diags)
	return w.Buf
}

// traceHead is the part of TraceBytes before the node records: fixed
// references, no inputs, no params, the given status, and the node count.
func traceHead(status byte, code uint32, nodeCount uint32) []byte {
	prog := asl.MustDerive(asl.HashSHA256, progArt(mustSeed("const")))
	res := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("a result")))
	w := enc.Writer{Buf: asl.AppendEncodedRef(nil, pel.SchemeRefDAG1)}
	w.Buf = asl.AppendEncodedRef(w.Buf, prog)
	w.U32(0)
	w.U8(0)
	w.Buf = asl.AppendEncodedRef(w.Buf, res)
	w.U8(status)
	w.U32(code)
	w.U32(nodeCount)
	return w.Buf
}

func traceRejects() []bytesCase {
	out := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hello")))
	okNode := rawTraceNode{id: 1, name: "pel.bytes.const", version: 1, outputs: []asl.Reference{out}}.bytes()
	failNode := func(status byte, code uint32) rawTraceNode {
		return rawTraceNode{id: 2, name: "pel.bytes.slice", version: 1, status: status, code: code,
			diags: []pel.DiagnosticEntry{{Code: pel.DiagNodeFailed, Message: []byte("failed")}}}
	}
	full := cat(traceHead(0, 0, 1), okNode)
	return []bytesCase{
		{"empty", "no bytes: scheme_ref missing", nil},
		{"scheme-ref-len-0", "scheme_ref with ref_len 0", h("00000000")},
		{"truncated-program-ref", "program_ref with ref_len 34 and 4 bytes following", cat(asl.AppendEncodedRef(nil, pel.SchemeRefDAG1), h("00000022 0001 abcd"))},
		{"input-count-past-end", "input_count 1 with nothing following", cat(asl.AppendEncodedRef(nil, pel.SchemeRefDAG1), asl.AppendEncodedRef(nil, out), h("00000001"))},
		{"input-count-2^32-1", "input_count 2^32-1: rejected before allocating", cat(asl.AppendEncodedRef(nil, pel.SchemeRefDAG1), asl.AppendEncodedRef(nil, out), h("ffffffff"), make([]byte, 32))},
		{"params-flag-02", "params_ref flag 0x02", cat(asl.AppendEncodedRef(nil, pel.SchemeRefDAG1), asl.AppendEncodedRef(nil, out), h("00000000 02"))},
		{"status-5", "overall status 5 is undefined", traceHead(5, 5, 0)},
		{"status-ok-code-1", "overall status OK with status_code 1", traceHead(0, 1, 0)},
		{"runtime-code-3", "overall RUNTIME_FAILED with status_code 3", traceHead(4, 3, 0)},
		{"node-count-past-end", "node_count 1 with no record following", traceHead(0, 0, 1)},
		{"node-count-2^32-1", "node_count 2^32-1: rejected before allocating", cat(traceHead(0, 0, 0xffffffff), make([]byte, 64))},
		{"empty-op-name", "a node record with an empty op_name", cat(traceHead(0, 0, 1), rawTraceNode{id: 1, version: 1, outputs: []asl.Reference{out}}.bytes())},
		{"op-name-not-utf8", "a node record op_name with byte 0xff", cat(traceHead(0, 0, 1), rawTraceNode{id: 1, name: "pel.\xff", version: 1}.bytes())},
		{"op-name-256", "a node record op_name of 256 bytes", cat(traceHead(0, 0, 1), rawTraceNode{id: 1, name: string(make([]byte, 256)), version: 1}.bytes())},
		{"node-status-scheme-unsupported", "a node record with status SCHEME_UNSUPPORTED", cat(traceHead(1, 1, 1), rawTraceNode{id: 1, name: "x", version: 1, status: 1, code: 1}.bytes())},
		{"node-status-9", "a node record with status 9", cat(traceHead(0, 0, 1), rawTraceNode{id: 1, name: "x", version: 1, status: 9}.bytes())},
		{"node-status-code-mismatch", "a node record INVALID_INPUTS with status_code 2", cat(traceHead(3, 3, 1), rawTraceNode{id: 1, name: "x", version: 1, status: 3, code: 2}.bytes())},
		{"output-count-2^32-1", "a node record claiming 2^32-1 outputs", cat(traceHead(0, 0, 1), u32(1), rawBytes32([]byte("x")), u32(1), h("00 00000000 ffffffff"), make([]byte, 16))},
		{"diagnostics-count-past-end", "a node record's diagnostics count 3 with 8 bytes following", cat(traceHead(4, 0x30001, 1), u32(2), rawBytes32([]byte("x")), u32(1), h("04 00030001 00000000 00000003 00000010 00000000"))},
		{"failed-record-not-last", "a failed record followed by an OK record", cat(traceHead(4, 0x30001, 2), failNode(4, 0x30001).bytes(), okNode)},
		{"ok-record-with-diagnostics", "an OK record carrying a diagnostic", cat(traceHead(0, 0, 1), rawTraceNode{id: 1, name: "x", version: 1, diags: []pel.DiagnosticEntry{{Code: 1, Message: []byte{}}}}.bytes())},
		{"failed-record-with-outputs", "a RUNTIME_FAILED record with an output", cat(traceHead(4, 0x30001, 1), rawTraceNode{id: 2, name: "x", version: 1, status: 4, code: 0x30001, outputs: []asl.Reference{out}}.bytes())},
		{"ok-status-failed-record", "overall OK while the last record failed", cat(traceHead(0, 0, 1), failNode(4, 0x30001).bytes())},
		{"runtime-status-ok-records", "overall RUNTIME_FAILED while every record is OK", cat(traceHead(4, 0x30001, 1), okNode)},
		{"runtime-code-differs", "overall RUNTIME_FAILED 0x00030002, the last record 0x00030001", cat(traceHead(4, 0x30002, 1), failNode(4, 0x30001).bytes())},
		{"inputs-status-ok-records", "overall INVALID_INPUTS with only OK records", cat(traceHead(3, 3, 1), okNode)},
		{"program-status-inputs-record", "overall INVALID_PROGRAM with a last INVALID_INPUTS record", cat(traceHead(2, 2, 1), failNode(3, 3).bytes())},
		{"scheme-unsupported-with-records", "overall SCHEME_UNSUPPORTED with a node record", cat(traceHead(1, 1, 1), okNode)},
		{"trailing-byte", "a complete trace followed by one byte", cat(full, h("00"))},
	}
}

func genTraceCodec() ([]Vector, error) {
	var l vectorList
	byName := map[string]surfCase{}
	for _, c := range surfCases() {
		byName[c.name] = c
	}
	var traces []trace.Trace
	for _, name := range traceRuns {
		c, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("trace.codec: no surface case %s", name)
		}
		run, err := runSurfCase(c)
		if err != nil {
			return nil, err
		}
		traces = append(traces, run.Trace)
	}
	for i, t := range traces {
		b, err := trace.Encode(t)
		if err != nil {
			return nil, err
		}
		c := byName[traceRuns[i]]
		tv, bh := traceToVec(t), Hex(b)
		l.add("trace.codec.encode."+c.name, "encode the trace of the run: "+c.desc, specTrace, KindTraceEncode, traceInput{Trace: &tv},
			traceEncodeExpect{TraceBytes: &bh, Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagPELTraceDAG1, b)).String()})
	}
	for i, t := range traces {
		b, _ := trace.Encode(t)
		d, err := trace.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: own encoding rejected: %w", traceRuns[i], err)
		}
		c := byName[traceRuns[i]]
		tv, bh := traceToVec(d), Hex(b)
		l.add("trace.codec.decode."+c.name, "decode and re-encode the trace of the run: "+c.desc, specTraceDec, KindTraceDecode,
			traceBytesInput{TraceBytes: &bh}, traceDecodeExpect{Trace: &tv})
	}
	for _, c := range traceRejects() {
		_, err := trace.Decode(c.in)
		var de *enc.DecodeError
		if !errors.As(err, &de) {
			return nil, fmt.Errorf("trace reject case %s: %v", c.name, err)
		}
		in := Hex(c.in)
		l.add("trace.codec.reject."+c.name, "reject: "+c.desc, specTraceDec, KindTraceDecode, traceBytesInput{TraceBytes: &in}, rejectExpect{RejectOf(err, "")})
	}
	return l.vs, l.err
}
