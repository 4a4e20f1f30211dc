package conformance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// The PEL case tables: program encodings (§9), canonical order (§4),
// Exec_DAG (§12), ExecutionResultValue (§8) and the scheme descriptor
// (§10). Generators turn them into vector files; every expected value comes
// from this implementation, and each case states the status or rejection
// it is meant to show, so a generator fails rather than freeze a surprise.

const (
	specValue      = "§8.2"
	specProgram    = "§9.1"
	specProgramDec = "§9.2"
	specDescriptor = "§10"
	specOrder      = "§4.1, §12.2"
	specExec       = "§12"
)

func init() {
	RegisterGenerator("pel.program", genPELProgram)
	RegisterGenerator("pel.order", genPELOrder)
	RegisterGenerator("pel.exec", genPELExec)
	RegisterGenerator("pel.value", genPELValue)
	RegisterGenerator("pel.descriptor", genPELDescriptor)
}

// vectorList collects vectors and the first error.
type vectorList struct {
	vs  []Vector
	err error
}

func (l *vectorList) add(id, desc, spec, kind string, input, expect any) {
	if l.err != nil {
		return
	}
	v, err := NewVector(id, desc, spec, kind, input, expect)
	if err != nil {
		l.err = err
		return
	}
	l.vs = append(l.vs, v)
}

func (l *vectorList) fail(format string, args ...any) {
	if l.err == nil {
		l.err = fmt.Errorf(format, args...)
	}
}

// Program building blocks.

func constParams(text string) []byte {
	b, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte(text)})
	if err != nil {
		panic(err)
	}
	return b
}

func constNode(id pel.NodeID, text string) pel.Node {
	return pel.Node{ID: id, Op: opreg.OpConst, Params: constParams(text)}
}

func opNode(id pel.NodeID, op opreg.OperationID, params []byte, inputs ...pel.DagInput) pel.Node {
	if params == nil {
		params = []byte{}
	}
	return pel.Node{ID: id, Op: op, Inputs: inputs, Params: params}
}

func sliceParams(off, n uint64) []byte {
	return opreg.EncodeSliceParams(opreg.SliceParams{Offset: off, Length: n})
}

func roots(pairs ...uint32) []pel.RootRef {
	var rs []pel.RootRef
	for i := 0; i+1 < len(pairs); i += 2 {
		rs = append(rs, pel.RootRef{NodeID: pel.NodeID(pairs[i]), OutputIndex: pairs[i+1]})
	}
	return rs
}

func mustSeed(name string) pel.Program {
	p, err := pel.Seed(name)
	if err != nil {
		panic(err)
	}
	return p
}

// Raw ProgramBytes, for encodings the Program type cannot produce.

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func rawExt(i uint32) []byte          { return cat([]byte{0}, u32(i)) }
func rawFrom(id, out uint32) []byte   { return cat([]byte{1}, u32(id), u32(out)) }
func rawRoot(id, out uint32) []byte   { return cat(u32(id), u32(out)) }
func rawBytes32(b []byte) []byte      { return cat(u32(uint32(len(b))), b) }
func rawCount(n int, b []byte) []byte { return cat(u32(uint32(n)), b) }

func rawNode(id uint32, name string, version uint32, params []byte, inputs ...[]byte) []byte {
	return cat(u32(id), rawBytes32([]byte(name)), u32(version), rawCount(len(inputs), cat(inputs...)), rawBytes32(params))
}

// rawProgram is node_count || nodes || root_count || roots.
func rawProgram(nodes [][]byte, roots [][]byte) []byte {
	return cat(rawCount(len(nodes), cat(nodes...)), rawCount(len(roots), cat(roots...)))
}

var (
	rawConstHello = sync.OnceValue(func() []byte { return rawNode(1, opreg.NameConst, 1, constParams("hello")) })
	rawHash2      = sync.OnceValue(func() []byte { return rawNode(2, opreg.NameHash, 1, nil, rawFrom(1, 0)) })
)

type programCase struct {
	name, desc string
	p          pel.Program
}

func programCases() []programCase {
	var cs []programCase
	for _, name := range pel.SeedNames() {
		cs = append(cs, programCase{"seed-" + name, "the reference seed program " + name, mustSeed(name)})
	}
	return append(cs,
		programCase{"empty", "no nodes and no roots: node_count 0, root_count 0", pel.Program{}},
		programCase{"no-roots", "one const node and no roots (valid encoding; Exec_DAG returns no outputs)",
			pel.Program{Nodes: []pel.Node{constNode(1, "x")}}},
		programCase{"multi-root", "const then hash with three roots naming node 2, node 1 and node 2 again",
			pel.Program{Nodes: []pel.Node{constNode(1, "hello"), opNode(2, opreg.OpHash, nil, pel.FromNode(1, 0))}, Roots: roots(2, 0, 1, 0, 2, 0)}},
		programCase{"both-input-kinds", "one concat node reading external input 0, node 1 output 0 and external input 3, in that order",
			pel.Program{Nodes: []pel.Node{constNode(1, "a"), opNode(2, opreg.OpConcat, nil, pel.External(0), pel.FromNode(1, 0), pel.External(3))}, Roots: roots(2, 0)}},
		programCase{"unicode-op-name", "an operation name with non-ASCII UTF-8 (\"acme.ünïcødé.ζ\", version 7) and raw params 01 02",
			pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OperationID{Name: "acme.ünïcødé.ζ", Version: 7}, Params: []byte{1, 2}}}, Roots: roots(1, 0)}},
		programCase{"op-name-255", "an operation name of 255 bytes, the maximum",
			pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OperationID{Name: strings.Repeat("n", 255), Version: 1}, Params: []byte{}}}}},
		programCase{"extreme-values", "node ids 0 and 2^32-1, version 2^32-1, input_index and output_index 2^32-1 (encodable; structurally invalid)",
			pel.Program{Nodes: []pel.Node{
				{ID: 0, Op: opreg.OperationID{Name: "x", Version: 0xffffffff}, Inputs: []pel.DagInput{pel.External(0xffffffff), pel.FromNode(0xffffffff, 0xffffffff)}, Params: []byte{}},
				{ID: 0xffffffff, Op: opreg.OpHash, Params: []byte{}},
			}, Roots: roots(0xffffffff, 0xffffffff)}},
	)
}

type bytesCase struct {
	name, desc string
	in         []byte
}

func programRejects() []bytesCase {
	long := strings.Repeat("a", 256)
	twoNodeName := strings.Repeat("n", 30)
	return []bytesCase{
		{"empty", "no bytes: node_count missing", nil},
		{"truncated-node-count", "node_count cut after 3 bytes", h("000000")},
		{"node-count-past-end", "node_count 1 with nothing after it", h("00000001")},
		{"node-count-2^32-1", "28 bytes claiming 2^32-1 nodes: rejected before allocating for them", cat(h("ffffffff"), make([]byte, 24))},
		{"node-count-2^31", "node_count 2^31 with 64 bytes following", cat(h("80000000"), make([]byte, 64))},
		{"root-count-missing", "node_count 0 and nothing else: root_count missing", h("00000000")},
		{"truncated-root-count", "root_count cut after 3 bytes", h("00000000 000000")},
		{"root-count-past-end", "root_count 2 with one 8-byte root", h("00000000 00000002 00000001 00000000")},
		{"root-count-2^32-1", "root_count 2^32-1 with 16 bytes following", cat(h("00000000 ffffffff"), make([]byte, 16))},
		{"trailing-byte", "the empty program followed by one byte", h("00000000 00000000 00")},
		{"trailing-bytes-seed", "the const seed followed by two bytes", cat(rawProgram([][]byte{rawConstHello()}, [][]byte{rawRoot(1, 0)}), h("0000"))},
		{"truncated-second-node-id", "node_count 2, a 50-byte first node, then 2 bytes of the second node_id",
			cat(rawCount(2, rawNode(1, twoNodeName, 1, nil)), h("0000"))},
		{"empty-op-name", "op_name of length 0", rawProgram([][]byte{rawNode(1, "", 1, h("00"))}, nil)},
		{"op-name-256", "op_name of 256 bytes, one more than the maximum", rawProgram([][]byte{rawNode(1, long, 1, nil)}, nil)},
		{"op-name-not-utf8", "op_name \"pel.\" followed by byte 0xff", rawProgram([][]byte{rawNode(1, "pel.\xff", 1, nil)}, nil)},
		{"op-name-overlong-utf8", "op_name with the overlong UTF-8 sequence c0 af", rawProgram([][]byte{rawNode(1, "a\xc0\xaf", 1, nil)}, nil)},
		{"op-name-length-past-end", "op_name length 255 with fewer bytes following", h("00000001 00000001 000000ff 0000000000000000000000000000000000")},
		{"truncated-op-version", "node_count 2 and the second node cut inside op_version",
			cat(rawCount(2, rawNode(1, twoNodeName, 1, nil)), h("00000002 00000001 61 000000"))},
		{"input-count-past-end", "input_count 2 with 4 bytes following", cat(u32(1), rawNode(1, opreg.NameConcat, 1, nil, rawExt(0), rawExt(1)))[:40:40]},
		{"input-count-2^32-1", "input_count 2^32-1: rejected before allocating", cat(h("00000001"), u32(1), rawBytes32([]byte("x")), u32(1), h("ffffffff"), make([]byte, 16))},
		{"input-tag-02", "a DagInput tag 0x02", rawProgram([][]byte{rawNode(1, opreg.NameHash, 1, nil, h("02 00000000"))}, nil)},
		{"input-tag-ff", "a DagInput tag 0xff", rawProgram([][]byte{rawNode(1, opreg.NameHash, 1, nil, h("ff 00000000 00000000"))}, nil)},
		{"truncated-external-input", "input_count 2: a 9-byte DagInputNode, then a DagInputExternal cut inside input_index",
			cat(u32(1), u32(1), rawBytes32([]byte(opreg.NameConcat)), u32(1), u32(2), rawFrom(1, 0), h("00 000000"))},
		{"truncated-node-input", "a DagInputNode cut inside output_index", cat(u32(1), u32(1), rawBytes32([]byte(opreg.NameHash)), u32(1), u32(1), h("01 00000001 0000"))},
		{"params-past-end", "params length 16 with 4 bytes following", cat(u32(1), u32(1), rawBytes32([]byte(opreg.NameSlice)), u32(1), u32(0), u32(16), h("00000000"), h("00000000"))},
		{"params-length-2^32-1", "params length 2^32-1", cat(u32(1), u32(1), rawBytes32([]byte("x")), u32(1), u32(0), h("ffffffff"), make([]byte, 8))},
		{"duplicate-node-id", "two nodes with id 1", rawProgram([][]byte{rawConstHello(), rawConstHello()}, nil)},
		{"descending-node-ids", "node 2 followed by node 1", rawProgram([][]byte{rawNode(2, opreg.NameConst, 1, constParams("a")), rawConstHello()}, nil)},
		{"descending-after-max", "node 2^32-1 followed by node 0", rawProgram([][]byte{rawNode(0xffffffff, "x", 1, nil), rawNode(0, "x", 1, nil)}, nil)},
	}
}

func genPELProgram() ([]Vector, error) {
	var l vectorList
	for _, c := range programCases() {
		b, err := pel.EncodeProgram(c.p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		art, _ := pel.ProgramArtifact(c.p)
		bh, pv := Hex(b), programToVec(c.p)
		l.add("pel.program.encode."+c.name, "encode: "+c.desc, specProgram, KindProgramEncode,
			programInput{Program: &pv}, programEncodeExpect{ProgramBytes: &bh, Reference: asl.MustDerive(asl.HashSHA256, art).String()})
	}
	for _, c := range programCases() {
		b, _ := pel.EncodeProgram(c.p)
		p, err := pel.DecodeProgram(b)
		if err != nil || !p.Equal(c.p) {
			return nil, fmt.Errorf("%s: own encoding does not decode back: %v", c.name, err)
		}
		bh, pv := Hex(b), programToVec(p)
		l.add("pel.program.decode."+c.name, "decode and re-encode: "+c.desc, specProgramDec, KindProgramDecode,
			programBytesInput{ProgramBytes: &bh}, programDecodeExpect{Program: &pv})
	}
	for _, c := range programRejects() {
		_, err := pel.DecodeProgram(c.in)
		var pe *pel.ProgramError
		var de *enc.DecodeError
		if !errors.As(err, &pe) || !errors.As(err, &de) {
			return nil, fmt.Errorf("reject case %s: %v is not a decode *ProgramError", c.name, err)
		}
		in, code := Hex(c.in), pe.Code
		l.add("pel.program.reject."+c.name, "reject: "+c.desc, specProgramDec, KindProgramDecode,
			programBytesInput{ProgramBytes: &in}, programDecodeExpect{Reject: RejectOf(err, ""), DiagnosticCode: &code})
	}
	return l.vs, l.err
}

type orderCase struct {
	name, desc string
	p          pel.Program
	want       []uint32 // nil: structurally invalid
	code       uint32   // the diagnostic code when invalid
}

func orderCases() []orderCase {
	leaf := func(id pel.NodeID) pel.Node { return constNode(id, "x") }
	hashOf := func(id, src pel.NodeID) pel.Node { return opNode(id, opreg.OpHash, nil, pel.FromNode(src, 0)) }
	concat := func(id pel.NodeID, in ...pel.DagInput) pel.Node { return opNode(id, opreg.OpConcat, nil, in...) }
	return []orderCase{
		{"empty", "no nodes: the empty order", pel.Program{}, []uint32{}, 0},
		{"independent", "three independent nodes run in ascending id order", pel.Program{Nodes: []pel.Node{leaf(1), leaf(2), leaf(7)}}, []uint32{1, 2, 7}, 0},
		{"chain", "a chain 1 -> 2 -> 3", pel.Program{Nodes: []pel.Node{leaf(1), hashOf(2, 1), hashOf(3, 2)}, Roots: roots(3, 0)}, []uint32{1, 2, 3}, 0},
		{"dependency-on-higher-id", "node 1 reads node 3; node 2 is independent: 2, 3, 1",
			pel.Program{Nodes: []pel.Node{hashOf(1, 3), leaf(2), leaf(3)}, Roots: roots(1, 0)}, []uint32{2, 3, 1}, 0},
		{"smallest-ready-first", "ready nodes 3 and 5; placing 3 readies 2, which precedes 5; 1 reads 5: 3, 2, 5, 1",
			pel.Program{Nodes: []pel.Node{hashOf(1, 5), hashOf(2, 3), leaf(3), leaf(5)}}, []uint32{3, 2, 5, 1}, 0},
		{"diamond", "1 feeds 2 and 3, both feed 4 (node 4 lists 3 before 2): 1, 2, 3, 4",
			pel.Program{Nodes: []pel.Node{leaf(1), hashOf(2, 1), hashOf(3, 1), concat(4, pel.FromNode(3, 0), pel.FromNode(2, 0))}, Roots: roots(4, 0)}, []uint32{1, 2, 3, 4}, 0},
		{"descending-chain", "a chain 9 -> 8 -> 7 against id order: 9, 8, 7",
			pel.Program{Nodes: []pel.Node{hashOf(7, 8), hashOf(8, 9), leaf(9)}, Roots: roots(7, 0)}, []uint32{9, 8, 7}, 0},
		{"self-loop", "node 2 reads its own output", pel.Program{Nodes: []pel.Node{leaf(1), concat(2, pel.FromNode(1, 0), pel.FromNode(2, 0))}}, nil, pel.DiagSelfLoop},
		{"dangling-input", "node 2 reads missing node 5", pel.Program{Nodes: []pel.Node{leaf(1), hashOf(2, 5)}}, nil, pel.DiagDanglingInput},
		{"dangling-root", "root 1 names missing node 3", pel.Program{Nodes: []pel.Node{leaf(1)}, Roots: roots(1, 0, 3, 0)}, nil, pel.DiagDanglingRoot},
		{"cycle-two", "nodes 1 and 2 read each other", pel.Program{Nodes: []pel.Node{hashOf(1, 2), hashOf(2, 1)}}, nil, pel.DiagCycle},
		{"cycle-three-with-tail", "a cycle 2 -> 3 -> 4 -> 2 plus node 1 and node 5 reading the cycle: the lowest unplaced id is 2",
			pel.Program{Nodes: []pel.Node{leaf(1), concat(2, pel.FromNode(1, 0), pel.FromNode(4, 0)), hashOf(3, 2), hashOf(4, 3), hashOf(5, 4)}}, nil, pel.DiagCycle},
		{"dangling-before-cycle", "a cycle and a dangling input: the dangling input is reported first",
			pel.Program{Nodes: []pel.Node{hashOf(1, 2), hashOf(2, 1), hashOf(3, 9)}}, nil, pel.DiagDanglingInput},
		{"inputs-before-roots", "a dangling root and a later self-loop: DagInputs are checked before roots",
			pel.Program{Nodes: []pel.Node{leaf(1), concat(2, pel.FromNode(2, 0))}, Roots: roots(8, 0)}, nil, pel.DiagSelfLoop},
	}
}

func genPELOrder() ([]Vector, error) {
	var l vectorList
	for _, c := range orderCases() {
		pv := programToVec(c.p)
		order, err := pel.CanonicalOrder(c.p)
		if c.want == nil {
			var pe *pel.ProgramError
			if !errors.As(err, &pe) || pe.Code != c.code {
				return nil, fmt.Errorf("order case %s: %v, want code 0x%x", c.name, err, c.code)
			}
			d := diagsToVec([]pel.DiagnosticEntry{pe.Diagnostic()})[0]
			l.add("pel.order.invalid."+c.name, "structurally invalid: "+c.desc, specOrder, KindCanonicalOrder,
				programInput{Program: &pv}, orderExpect{Invalid: &d})
			continue
		}
		got := make([]uint32, len(order))
		for i, id := range order {
			got[i] = uint32(id)
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			return nil, fmt.Errorf("order case %s: %v, %v; want %v", c.name, got, err, c.want)
		}
		l.add("pel.order."+c.name, "canonical order: "+c.desc, specOrder, KindCanonicalOrder,
			programInput{Program: &pv}, orderExpect{Order: &got})
	}
	return l.vs, l.err
}

type execCase struct {
	name, desc string
	prog       asl.Artifact
	inputs     []asl.Artifact
	params     *asl.Artifact
	status     pel.ExecutionStatus
	diag       uint32 // code of the first diagnostic (0 for OK)
}

// limitCase is an execCase run with deterministic bounds (§12.6), or with
// a registry other than the kernel (§7.9).
type limitCase struct {
	execCase
	limits   pel.Limits
	registry string
}

func progArt(p pel.Program) asl.Artifact {
	a, err := pel.ProgramArtifact(p)
	if err != nil {
		panic(err)
	}
	return a
}

func prog(roots []pel.RootRef, nodes ...pel.Node) asl.Artifact {
	return progArt(pel.Program{Nodes: nodes, Roots: roots})
}

func rawProgArt(b []byte) asl.Artifact { return asl.Tagged(asl.TagPELProgramDAG1, b) }

func arts(bs ...string) []asl.Artifact {
	var out []asl.Artifact
	for _, b := range bs {
		out = append(out, asl.Untagged([]byte(b)))
	}
	return out
}

func execCases() []execCase {
	hello := arts("hello")
	global := asl.Tagged(0x42, []byte("global params"))
	seed := func(name string) asl.Artifact { return progArt(mustSeed(name)) }
	r1 := roots(1, 0)
	hashN := func(id, src pel.NodeID) pel.Node { return opNode(id, opreg.OpHash, nil, pel.FromNode(src, 0)) }
	ok, ip, ii, rf := pel.StatusOK, pel.StatusInvalidProgram, pel.StatusInvalidInputs, pel.StatusRuntimeFailed
	return []execCase{
		// OK paths.
		{"ok.seed-const", "seed const: no inputs, output \"hello\"", seed("const"), nil, nil, ok, 0},
		{"ok.seed-concat", "seed concat of \"hello \" and a tagged \"world\": the output is untagged", seed("concat"),
			[]asl.Artifact{asl.Untagged([]byte("hello ")), asl.Tagged(7, []byte("world"))}, nil, ok, 0},
		{"ok.seed-concat1", "seed concat1 of a tagged input: its bytes, untagged", seed("concat1"), []asl.Artifact{asl.Tagged(7, []byte("abc"))}, nil, ok, 0},
		{"ok.seed-slice", "seed slice of \"hello\": bytes [1,4) = \"ell\"", seed("slice"), hello, nil, ok, 0},
		{"ok.seed-hash", "seed hash of \"hello\": its SHA-256 digest", seed("hash"), hello, nil, ok, 0},
		{"ok.seed-const-hash", "seed const-hash: SHA-256 of \"hello\"", seed("const-hash"), nil, nil, ok, 0},
		{"ok.empty-program", "no nodes and no roots: OK with no outputs", prog(nil), nil, nil, ok, 0},
		{"ok.no-roots", "one node and no roots: OK with no outputs", prog(nil, constNode(1, "x")), nil, nil, ok, 0},
		{"ok.extra-inputs", "seed hash given three inputs: only input 0 is read", seed("hash"), arts("a", "b", "c"), nil, ok, 0},
		{"ok.params-ignored", "seed const with a global params artifact it does not read", seed("const"), nil, &global, ok, 0},
		{"ok.multi-root-order", "roots in program order (node 3, node 1, node 3): outputs in root order",
			prog(roots(3, 0, 1, 0, 3, 0), constNode(1, "ab"), opNode(2, opreg.OpSlice, sliceParams(1, 1), pel.FromNode(1, 0)), opNode(3, opreg.OpConcat, nil, pel.FromNode(2, 0), pel.External(0))),
			arts("-in"), nil, ok, 0},
		{"ok.canonical-order", "node 1 reads node 3, node 2 is independent: nodes run 2, 3, 1",
			prog(roots(1, 0, 2, 0), hashN(1, 3), constNode(2, "two"), constNode(3, "three")), nil, nil, ok, 0},
		{"ok.const-tagged", "pel.bytes.const with a type tag: the output keeps it",
			prog(r1, pel.Node{ID: 1, Op: opreg.OpConst, Params: h("01 00000042 00000002 ff00")}), nil, nil, ok, 0},
		{"ok.slice-empty-at-end", "slice offset 5 length 0 of \"hello\": the empty artifact", prog(r1, opNode(1, opreg.OpSlice, sliceParams(5, 0), pel.External(0))), hello, nil, ok, 0},
		{"ok.concat-empties", "concat of two empty inputs: the empty artifact", prog(r1, opNode(1, opreg.OpConcat, nil, pel.External(0), pel.External(1))), arts("", ""), nil, ok, 0},
		{"ok.params-with-global", "pel.bytes.params with a tagged global params artifact: output equals it, tag kept",
			prog(r1, opNode(1, opreg.OpParams, nil)), nil, &global, ok, 0},
		{"ok.params-feeding-concat", "pel.bytes.params concatenated with input 0",
			prog(roots(2, 0), opNode(1, opreg.OpParams, nil), opNode(2, opreg.OpConcat, nil, pel.FromNode(1, 0), pel.External(0))), hello, &global, ok, 0},

		// INVALID_PROGRAM before evaluation: the artifact and its decoding.
		{"invalid-program.untagged", "the program artifact has no type tag", asl.Untagged(seed("const").Bytes), nil, nil, ip, pel.DiagProgramTypeTag},
		{"invalid-program.wrong-tag", "the program artifact is tagged 0x00000102 (a trace tag)", asl.Tagged(asl.TagPELTraceDAG1, seed("const").Bytes), nil, nil, ip, pel.DiagProgramTypeTag},
		{"invalid-program.undecodable", "ProgramBytes truncated (node_count past end)", rawProgArt(h("00000001")), nil, nil, ip, pel.DiagProgramMalformed},
		{"invalid-program.trailing-bytes", "ProgramBytes with a trailing byte", rawProgArt(h("00000000 00000000 00")), nil, nil, ip, pel.DiagProgramMalformed},
		{"invalid-program.duplicate-id", "two nodes with id 1", rawProgArt(rawProgram([][]byte{rawConstHello(), rawConstHello()}, [][]byte{rawRoot(1, 0)})), nil, nil, ip, pel.DiagDuplicateNodeID},
		{"invalid-program.node-order", "node 2 listed before node 1", rawProgArt(rawProgram([][]byte{rawNode(2, opreg.NameConst, 1, constParams("a")), rawConstHello()}, nil)), nil, nil, ip, pel.DiagNodeOrder},
		// Structure.
		{"invalid-program.cycle", "nodes 1 and 2 read each other", prog(r1, hashN(1, 2), hashN(2, 1)), nil, nil, ip, pel.DiagCycle},
		{"invalid-program.self-loop", "node 1 reads its own output", prog(r1, hashN(1, 1)), nil, nil, ip, pel.DiagSelfLoop},
		{"invalid-program.dangling-input", "node 2 reads missing node 4", prog(roots(2, 0), constNode(1, "x"), hashN(2, 4)), nil, nil, ip, pel.DiagDanglingInput},
		{"invalid-program.dangling-root", "the root names missing node 2", prog(roots(2, 0), constNode(1, "x")), nil, nil, ip, pel.DiagDanglingRoot},
		// Operations, arity, params.
		{"invalid-program.unknown-op-name", "operation acme.unknown version 1 is not in the kernel", prog(r1, opNode(1, opreg.OperationID{Name: "acme.unknown", Version: 1}, nil)), nil, nil, ip, pel.DiagUnknownOperation},
		{"invalid-program.unknown-op-version", "pel.bytes.hash.asl1 version 2 is not in the kernel", prog(r1, opNode(1, opreg.OperationID{Name: opreg.NameHash, Version: 2}, nil, pel.External(0))), hello, nil, ip, pel.DiagUnknownOperation},
		{"invalid-program.unknown-op-before-arity", "node 1 has a wrong input count and node 3 an unknown operation: operations are resolved first",
			prog(roots(3, 0), opNode(1, opreg.OpHash, nil), constNode(2, "x"), opNode(3, opreg.OperationID{Name: "acme.unknown", Version: 1}, nil)), nil, nil, ip, pel.DiagUnknownOperation},
		{"invalid-program.arity-const", "pel.bytes.const with one input (takes exactly 0)", prog(r1, pel.Node{ID: 1, Op: opreg.OpConst, Inputs: []pel.DagInput{pel.External(0)}, Params: constParams("x")}), hello, nil, ip, pel.DiagArity},
		{"invalid-program.arity-concat", "pel.bytes.concat with no inputs (takes at least 1)", prog(r1, opNode(1, opreg.OpConcat, nil)), nil, nil, ip, pel.DiagArity},
		{"invalid-program.arity-slice", "pel.bytes.slice with two inputs (takes exactly 1)", prog(r1, opNode(1, opreg.OpSlice, sliceParams(0, 1), pel.External(0), pel.External(0))), hello, nil, ip, pel.DiagArity},
		{"invalid-program.arity-hash", "pel.bytes.hash.asl1 with no inputs (takes exactly 1)", prog(r1, opNode(1, opreg.OpHash, nil)), nil, nil, ip, pel.DiagArity},
		{"invalid-program.arity-params", "pel.bytes.params with one input (takes exactly 0)", prog(r1, opNode(1, opreg.OpParams, nil, pel.External(0))), hello, &global, ip, pel.DiagArity},
		{"invalid-program.params-const-flag", "pel.bytes.const params with has_tag 0x02", prog(r1, pel.Node{ID: 1, Op: opreg.OpConst, Params: h("02 00000000")}), nil, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.params-const-trailing", "pel.bytes.const params with a trailing byte", prog(r1, pel.Node{ID: 1, Op: opreg.OpConst, Params: cat(constParams("hi"), h("00"))}), nil, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.params-const-empty", "pel.bytes.const with empty params", prog(r1, pel.Node{ID: 1, Op: opreg.OpConst, Params: []byte{}}), nil, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.params-slice-short", "pel.bytes.slice params of 15 bytes", prog(r1, opNode(1, opreg.OpSlice, sliceParams(1, 3)[:15], pel.External(0))), hello, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.params-concat", "pel.bytes.concat with one params byte (must be empty)", prog(r1, opNode(1, opreg.OpConcat, h("00"), pel.External(0))), hello, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.params-hash", "pel.bytes.hash.asl1 with params 0001 (must be empty)", prog(r1, opNode(1, opreg.OpHash, h("0001"), pel.External(0))), hello, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.params-params", "pel.bytes.params with params ff (must be empty)", prog(r1, opNode(1, opreg.OpParams, h("ff"))), nil, &global, ip, pel.DiagParamsDecode},
		{"invalid-program.params-before-runtime", "node 2 has bad params; node 1 would fail at runtime: params are checked before evaluation",
			prog(roots(2, 0), opNode(1, opreg.OpSlice, sliceParams(9, 9), pel.External(0)), opNode(2, opreg.OpHash, h("00"), pel.FromNode(1, 0))), hello, nil, ip, pel.DiagParamsDecode},
		// INVALID_PROGRAM during and after evaluation.
		{"invalid-program.node-output-index", "node 2 reads output 1 of node 1, which has one output", prog(roots(2, 0), constNode(1, "x"), opNode(2, opreg.OpHash, nil, pel.FromNode(1, 1))), nil, nil, ip, pel.DiagNodeOutputIndex},
		{"invalid-program.root-output-index", "the root names output 1 of a node with one output", prog(roots(1, 1), constNode(1, "x")), nil, nil, ip, pel.DiagRootOutputIndex},
		{"invalid-program.root-output-index-second", "root 0 is fine, root 1 names output 2^32-1", prog(roots(1, 0, 1, 0xffffffff), constNode(1, "x")), nil, nil, ip, pel.DiagRootOutputIndex},

		// INVALID_INPUTS.
		{"invalid-inputs.no-inputs", "seed hash with no inputs", seed("hash"), nil, nil, ii, pel.DiagMissingInput},
		{"invalid-inputs.index-out-of-range", "seed concat with one input: input index 1 is missing", seed("concat"), hello, nil, ii, pel.DiagMissingInput},
		{"invalid-inputs.index-2^32-1", "input_index 2^32-1", prog(r1, opNode(1, opreg.OpHash, nil, pel.External(0xffffffff))), hello, nil, ii, pel.DiagMissingInput},
		{"invalid-inputs.after-ok-nodes", "nodes 1 and 2 run, node 3 reads a missing input: evaluation stops there",
			prog(roots(3, 0), constNode(1, "a"), hashN(2, 1), opNode(3, opreg.OpConcat, nil, pel.FromNode(2, 0), pel.External(2))), arts("x", "y"), nil, ii, pel.DiagMissingInput},
		{"invalid-inputs.params-missing", "pel.bytes.params without a global params artifact", prog(r1, opNode(1, opreg.OpParams, nil)), nil, nil, ii, pel.DiagMissingGlobal},
		{"invalid-inputs.input-before-runtime", "node 1 reads missing input 1; node 2, whose slice would fail at runtime, is never reached",
			prog(roots(2, 0), opNode(1, opreg.OpHash, nil, pel.External(1)), opNode(2, opreg.OpSlice, sliceParams(9, 9), pel.FromNode(1, 0))), hello, nil, ii, pel.DiagMissingInput},

		// RUNTIME_FAILED: the kernel's runtime errors (only pel.bytes.slice has one).
		{"runtime-failed.slice-length", "seed slice of \"ab\": offset 1 + length 3 exceeds 2", seed("slice"), arts("ab"), nil, rf, pel.DiagNodeFailed},
		{"runtime-failed.slice-offset", "slice offset 6 length 0 of \"hello\": offset past the end", prog(r1, opNode(1, opreg.OpSlice, sliceParams(6, 0), pel.External(0))), hello, nil, rf, pel.DiagNodeFailed},
		{"runtime-failed.slice-overflow", "slice offset 2^64-1 length 2: offset + length overflows 64 bits", prog(r1, opNode(1, opreg.OpSlice, sliceParams(^uint64(0), 2), pel.External(0))), hello, nil, rf, pel.DiagNodeFailed},
		{"runtime-failed.after-ok-nodes", "const, then slice of it out of range: node 1 OK, node 2 fails, node 3 not evaluated",
			prog(roots(3, 0), constNode(1, "abc"), opNode(2, opreg.OpSlice, sliceParams(2, 2), pel.FromNode(1, 0)), hashN(3, 2)), nil, nil, rf, pel.DiagNodeFailed},
		{"runtime-failed.first-in-canonical-order", "two failing slices; node 3 runs before node 2 because node 2 reads node 4: node 3 is reported",
			prog(roots(2, 0, 3, 0), constNode(1, "abc"), opNode(2, opreg.OpSlice, sliceParams(0, 9), pel.FromNode(4, 0)), opNode(3, opreg.OpSlice, sliceParams(5, 1), pel.FromNode(1, 0)), hashN(4, 1)),
			nil, nil, rf, pel.DiagNodeFailed},

		// Precedence (§12.2): each rule that orders two failures, pinned.
		{"invalid-program.unknown-op-before-params", "node 1's const params do not decode and node 2's operation is unknown: operations are resolved first (seed §5.3 step 2)",
			prog(roots(2, 0), pel.Node{ID: 1, Op: opreg.OpConst, Params: []byte{}}, opNode(2, opreg.OperationID{Name: "acme.unknown", Version: 1}, nil)), nil, nil, ip, pel.DiagUnknownOperation},
		{"invalid-program.structure-before-unknown-op", "node 1's operation is unknown and node 2 reads missing node 7: structure is checked first",
			prog(roots(2, 0), opNode(1, opreg.OperationID{Name: "acme.unknown", Version: 1}, nil), hashN(2, 7)), nil, nil, ip, pel.DiagDanglingInput},
		{"invalid-program.params-node1-before-arity-node2", "node 1's params do not decode, node 2 has a wrong input count: per node, in ascending id order",
			prog(roots(2, 0), pel.Node{ID: 1, Op: opreg.OpConst, Params: h("02")}, opNode(2, opreg.OpHash, nil)), nil, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.arity-node1-before-params-node2", "node 1 has a wrong input count, node 2's params do not decode: node 1 is reported",
			prog(roots(2, 0), opNode(1, opreg.OpHash, nil), pel.Node{ID: 2, Op: opreg.OpConst, Params: h("02")}), nil, nil, ip, pel.DiagArity},
		{"invalid-program.arity-before-params-same-node", "one slice node with two inputs and 3-byte params: arity is checked before params",
			prog(r1, opNode(1, opreg.OpSlice, h("000102"), pel.External(0), pel.External(0))), hello, nil, ip, pel.DiagArity},
		{"invalid-program.output-index-before-missing-input", "node 2's input 0 names output 1 of node 1, its input 1 is missing external input 5: inputs resolve in order",
			prog(roots(2, 0), constNode(1, "x"), opNode(2, opreg.OpConcat, nil, pel.FromNode(1, 1), pel.External(5))), nil, nil, ip, pel.DiagNodeOutputIndex},
		{"invalid-inputs.missing-input-before-output-index", "node 2's input 0 is missing external input 5, its input 1 names output 1 of node 1: inputs resolve in order",
			prog(roots(2, 0), constNode(1, "x"), opNode(2, opreg.OpConcat, nil, pel.External(5), pel.FromNode(1, 1))), nil, nil, ii, pel.DiagMissingInput},
		{"invalid-program.output-index-before-root", "node 2 names output 1 of node 1 and the root names output 3 of node 2: evaluation fails before roots resolve",
			prog(roots(2, 3), constNode(1, "x"), opNode(2, opreg.OpHash, nil, pel.FromNode(1, 1))), nil, nil, ip, pel.DiagNodeOutputIndex},
		{"runtime-failed.before-root-error", "node 1's slice fails at runtime and the root names output 1: the runtime failure is reported",
			prog(roots(1, 1), opNode(1, opreg.OpSlice, sliceParams(9, 9), pel.External(0))), hello, nil, rf, pel.DiagNodeFailed},
		{"runtime-failed.before-missing-global", "node 1's slice fails at runtime, node 2 is pel.bytes.params without global params: node 1 runs first",
			prog(roots(2, 0), opNode(1, opreg.OpSlice, sliceParams(9, 9), pel.External(0)), opNode(2, opreg.OpParams, nil)), hello, nil, rf, pel.DiagNodeFailed},

		// Params bounds (§11.2).
		{"ok.const-1mib", "pel.bytes.const of exactly 1 MiB (the bound) is accepted; node 2 hashes it so the output stays small",
			prog(roots(2, 0), pel.Node{ID: 1, Op: opreg.OpConst, Params: constParams(string(bytes.Repeat([]byte{0xa5}, opreg.MaxConstBytes)))}, hashN(2, 1)), nil, nil, ok, 0},
		{"invalid-program.params-const-1mib-plus-1", "pel.bytes.const of 1 MiB + 1 bytes (all present): above the bound",
			prog(r1, pel.Node{ID: 1, Op: opreg.OpConst, Params: cat(h("00"), rawBytes32(bytes.Repeat([]byte{0xa5}, opreg.MaxConstBytes+1)))}), nil, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.params-const-length-past-end", "pel.bytes.const params claiming 5 bytes with 2 present",
			prog(r1, pel.Node{ID: 1, Op: opreg.OpConst, Params: h("00 00000005 6869")}), nil, nil, ip, pel.DiagParamsDecode},
		{"invalid-program.params-slice-long", "pel.bytes.slice params of 17 bytes (exactly 16 required)",
			prog(r1, opNode(1, opreg.OpSlice, cat(sliceParams(1, 3), h("00")), pel.External(0))), hello, nil, ip, pel.DiagParamsDecode},
	}
}

// limitExecCases run with deterministic bounds (§12.6).
func limitExecCases() []limitCase {
	seed := func(name string) asl.Artifact { return progArt(mustSeed(name)) }
	hashN := func(id, src pel.NodeID) pel.Node { return opNode(id, opreg.OpHash, nil, pel.FromNode(src, 0)) }
	type e = execCase
	return []limitCase{
		{execCase: e{name: "runtime-failed.limit-nodes", desc: "seed const-hash with max_nodes 1: node 2 is not evaluated, status_code 4",
			prog: seed("const-hash"), status: pel.StatusRuntimeFailed, diag: pel.DiagLimitNodes}, limits: pel.Limits{MaxNodes: 1}},
		{execCase: e{name: "runtime-failed.limit-output-bytes", desc: "seed concat of \"hello \" and \"world\" with max_output_bytes 10: 11 bytes, status_code 5",
			prog: seed("concat"), inputs: arts("hello ", "world"), status: pel.StatusRuntimeFailed, diag: pel.DiagLimitOutputBytes}, limits: pel.Limits{MaxOutputBytes: 10}},
		{execCase: e{name: "runtime-failed.limit-nodes-before-inputs", desc: "max_nodes 1 and node 2 reads a missing input: the node bound is checked before inputs resolve",
			prog:   prog(roots(2, 0), constNode(1, "a"), opNode(2, opreg.OpConcat, nil, pel.FromNode(1, 0), pel.External(5))),
			status: pel.StatusRuntimeFailed, diag: pel.DiagLimitNodes}, limits: pel.Limits{MaxNodes: 1}},
		{execCase: e{name: "ok.within-limits", desc: "seed const-hash with max_nodes 2 and max_output_bytes 37 (5 + 32 bytes): both bounds are inclusive",
			prog: seed("const-hash"), status: pel.StatusOK}, limits: pel.Limits{MaxNodes: 2, MaxOutputBytes: 37}},
		{execCase: e{name: "runtime-failed.slice-error-before-limit", desc: "slice offset 9 length 9 of \"hello\" with max_output_bytes 1: a failing operation declares no size, so its runtime error wins over the bound",
			prog: prog(roots(1, 0), opNode(1, opreg.OpSlice, sliceParams(9, 9), pel.External(0))), inputs: arts("hello"), status: pel.StatusRuntimeFailed, diag: pel.DiagNodeFailed}, limits: pel.Limits{MaxOutputBytes: 1}},
		{execCase: e{name: "runtime-failed.limit-output-bytes-declared", desc: "const \"ab\" then concat of it four times with max_output_bytes 9: the declared 8 bytes bring the total to 10, checked before the concat runs",
			prog:   prog(roots(2, 0), constNode(1, "ab"), opNode(2, opreg.OpConcat, nil, pel.FromNode(1, 0), pel.FromNode(1, 0), pel.FromNode(1, 0), pel.FromNode(1, 0))),
			status: pel.StatusRuntimeFailed, diag: pel.DiagLimitOutputBytes}, limits: pel.Limits{MaxOutputBytes: 9}},
		{execCase: e{name: "invalid-program.before-limits", desc: "a cycle with max_nodes 1: validation precedes evaluation and its bounds",
			prog: prog(roots(1, 0), hashN(1, 2), hashN(2, 1)), status: pel.StatusInvalidProgram, diag: pel.DiagCycle}, limits: pel.Limits{MaxNodes: 1}},
	}
}

// testRegistryExecCases need an operation the kernel lacks: they run with
// the registry "kernel+test/1" (§7.9).
func testRegistryExecCases() []limitCase {
	zero := opreg.OperationID{Name: TestOpZero, Version: 1}
	type e = execCase
	return []limitCase{
		{execCase: e{name: "invalid-program.zero-outputs-as-input", desc: "node 1 (test.zero) has no outputs and node 2 reads its output 0",
			prog:   prog(roots(2, 0), opNode(1, zero, nil), opNode(2, opreg.OpHash, nil, pel.FromNode(1, 0))),
			status: pel.StatusInvalidProgram, diag: pel.DiagNodeOutputIndex}, registry: RegistryKernelTest},
		{execCase: e{name: "invalid-program.zero-outputs-as-root", desc: "the root names output 0 of node 1 (test.zero), which has no outputs",
			prog:   prog(roots(1, 0), opNode(1, zero, nil, pel.External(0))),
			inputs: arts("x"), status: pel.StatusInvalidProgram, diag: pel.DiagRootOutputIndex}, registry: RegistryKernelTest},
		{execCase: e{name: "ok.zero-outputs-unread", desc: "node 1 (test.zero) runs and yields nothing; the root is node 2",
			prog:   prog(roots(2, 0), opNode(1, zero, nil), constNode(2, "x")),
			status: pel.StatusOK}, registry: RegistryKernelTest},
	}
}

func execVector(c execCase, limits pel.Limits, registry string) (execInput, execExpect, error) {
	reg, err := vectorRegistry(registry)
	if err != nil {
		return execInput{}, execExpect{}, err
	}
	in := execInput{Program: ptr(artifactToJSON(c.prog)), Inputs: []artifactJSON{}, Registry: registry}
	for _, a := range c.inputs {
		in.Inputs = append(in.Inputs, artifactToJSON(a))
	}
	if c.params != nil {
		in.Params = ptr(artifactToJSON(*c.params))
	}
	in.Limits = limitsToVec(limits)
	var events []pel.NodeEvent
	outs, res, err := pel.ExecDAGWith(reg, c.prog, c.inputs, c.params, pel.ObserverFunc(func(e pel.NodeEvent) { events = append(events, e) }), pel.RunOptions{Limits: limits})
	if err != nil {
		return execInput{}, execExpect{}, err
	}
	if res.Status != c.status || (c.diag == 0) != (len(res.Diagnostics) == 0) || c.diag != 0 && res.Diagnostics[0].Code != c.diag {
		return execInput{}, execExpect{}, fmt.Errorf("exec case %s: status %s diagnostics %v, want %s with first code 0x%x", c.name, res.Status, diagsToVec(res.Diagnostics), c.status, c.diag)
	}
	rv, err := pel.EncodeResultValue(res)
	if err != nil {
		return execInput{}, execExpect{}, err
	}
	exp := execExpect{Status: res.Status.String(), StatusCode: ptr(res.Summary.StatusCode), Kind: res.Summary.Kind.String(),
		Outputs: []artifactJSON{}, Diagnostics: diagsToVec(res.Diagnostics), Nodes: []nodeEventVec{}, ResultValue: ptr(Hex(rv))}
	for _, o := range outs {
		exp.Outputs = append(exp.Outputs, artifactToJSON(o))
	}
	for _, e := range events {
		exp.Nodes = append(exp.Nodes, nodeEventVec{ID: uint32(e.NodeID), Status: e.Status.String(), StatusCode: e.StatusCode})
	}
	for _, d := range exp.Diagnostics {
		if d.Message == nil {
			return execInput{}, execExpect{}, fmt.Errorf("exec case %s: diagnostic message is not UTF-8", c.name)
		}
	}
	return in, exp, nil
}

func genPELExec() ([]Vector, error) {
	var l vectorList
	var cases []limitCase
	for _, c := range execCases() {
		cases = append(cases, limitCase{execCase: c})
	}
	cases = append(cases, limitExecCases()...)
	for _, c := range append(cases, testRegistryExecCases()...) {
		in, exp, err := execVector(c.execCase, c.limits, c.registry)
		if err != nil {
			return nil, err
		}
		spec := specExec
		if c.limits != (pel.Limits{}) {
			spec = "§12.6"
		}
		if c.registry != "" {
			spec = "§7.9"
		}
		l.add("pel.exec."+c.name, c.desc, spec, KindExecDAG, in, exp)
	}
	return l.vs, l.err
}

var refBLAKE3Hello = sync.OnceValue(func() asl.Reference {
	return asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("hello")))
})

func valueCases() []struct {
	name, desc string
	v          pel.ExecutionResultValue
} {
	val := func(s pel.ExecutionStatus, code uint32, scheme asl.Reference, ds ...pel.DiagnosticEntry) pel.ExecutionResultValue {
		return pel.ExecutionResultValue{PEL1Version: 1, Status: s, SchemeRef: scheme, Summary: pel.ExecutionErrorSummary{Kind: s.Kind(), StatusCode: code}, Diagnostics: ds}
	}
	d := func(code uint32, msg string) pel.DiagnosticEntry {
		return pel.DiagnosticEntry{Code: code, Message: []byte(msg)}
	}
	dag1 := pel.SchemeRefDAG1
	return []struct {
		name, desc string
		v          pel.ExecutionResultValue
	}{
		{"ok", "status OK, kind NONE, status_code 0, no diagnostics", val(pel.StatusOK, 0, dag1)},
		{"scheme-unsupported", "SCHEME_UNSUPPORTED (1/1/1) under a BLAKE3 scheme reference", val(pel.StatusSchemeUnsupported, 1, refBLAKE3Hello(), d(0x100, "scheme not supported"))},
		{"invalid-program", "INVALID_PROGRAM (2/2/2) with one diagnostic", val(pel.StatusInvalidProgram, 2, dag1, d(pel.DiagCycle, "dependency cycle"))},
		{"invalid-inputs", "INVALID_INPUTS (3/3/3) with one diagnostic", val(pel.StatusInvalidInputs, 3, dag1, d(pel.DiagMissingInput, "input 0 missing"))},
		{"runtime-failed", "RUNTIME_FAILED with status_code 0x00030001 and two diagnostics", val(pel.StatusRuntimeFailed, 0x00030001, dag1, d(pel.DiagNodeFailed, "node 1 failed"), d(0x00030001, "slice out of range"))},
		{"runtime-failed-code-1", "RUNTIME_FAILED with status_code 1 (allowed: not 0, 2 or 3)", val(pel.StatusRuntimeFailed, 1, dag1)},
		{"runtime-failed-code-max", "RUNTIME_FAILED with status_code 2^32-1", val(pel.StatusRuntimeFailed, 0xffffffff, dag1)},
		{"empty-message", "a diagnostic with an empty message", val(pel.StatusInvalidProgram, 2, dag1, d(7, ""))},
		{"binary-message", "a diagnostic whose message is not UTF-8 (bytes 00 ff fe)", val(pel.StatusInvalidProgram, 2, dag1, pel.DiagnosticEntry{Code: 1, Message: []byte{0, 0xff, 0xfe}})},
		{"unknown-hash-scheme", "a scheme reference with unregistered hash id 0x7777 and a 2-byte digest", val(pel.StatusOK, 0, asl.MustParseReference("77770102"))},
	}
}

func valueRejects() []bytesCase {
	ok, _ := pel.EncodeResultValue(pel.ExecutionResultValue{PEL1Version: 1, SchemeRef: pel.SchemeRefDAG1})
	refEnc := asl.AppendEncodedRef(nil, pel.SchemeRefDAG1)
	head := func(status byte) []byte { return cat(h("0001"), []byte{status}, refEnc) }
	return []bytesCase{
		{"empty", "no bytes: pel1_version missing", nil},
		{"truncated-version", "pel1_version cut after 1 byte", h("00")},
		{"version-0", "pel1_version 0", cat(h("0000"), ok[2:])},
		{"version-2", "pel1_version 2", cat(h("0002"), ok[2:])},
		{"status-5", "status 5 is not a defined ExecutionStatus", cat(head(5), h("05 00000005 00000000"))},
		{"status-ff", "status 0xff", cat(head(0xff), h("00 00000000 00000000"))},
		{"scheme-ref-missing", "nothing after status", h("0001 00")},
		{"scheme-ref-len-1", "scheme_ref with ref_len 1", cat(h("0001 00 00000001 00"), h("00 00000000 00000000"))},
		{"scheme-ref-reserved", "scheme_ref framing the reserved hash id 0x0000", cat(h("0001 00 00000002 0000"), h("00 00000000 00000000"))},
		{"scheme-ref-past-end", "scheme_ref ref_len 34 with 4 bytes following", h("0001 00 00000022 00010203")},
		{"kind-mismatch", "status OK with kind PROGRAM", cat(head(0), h("02 00000000 00000000"))},
		{"kind-5", "status OK with undefined kind 5", cat(head(0), h("05 00000000 00000000"))},
		{"ok-code-1", "status OK with status_code 1", cat(head(0), h("00 00000001 00000000"))},
		{"invalid-program-code-3", "INVALID_PROGRAM with status_code 3", cat(head(2), h("02 00000003 00000000"))},
		{"scheme-unsupported-code-0", "SCHEME_UNSUPPORTED with status_code 0", cat(head(1), h("01 00000000 00000000"))},
		{"runtime-code-0", "RUNTIME_FAILED with status_code 0", cat(head(4), h("04 00000000 00000000"))},
		{"runtime-code-2", "RUNTIME_FAILED with status_code 2", cat(head(4), h("04 00000002 00000000"))},
		{"runtime-code-3", "RUNTIME_FAILED with status_code 3", cat(head(4), h("04 00000003 00000000"))},
		{"truncated-status-code", "summary.status_code cut after 2 bytes", cat(head(0), h("00 0000"))},
		{"diagnostics-missing", "the diagnostics count is missing", cat(head(0), h("00 00000000"))},
		{"diagnostics-count-past-end", "diagnostics count 1 with 4 bytes following", cat(head(2), h("02 00000002 00000001 00000009"))},
		{"diagnostics-count-2^32-1", "diagnostics count 2^32-1: rejected before allocating", cat(head(2), h("02 00000002 ffffffff"), make([]byte, 16))},
		{"message-past-end", "a diagnostic message length 9 with 2 bytes following", cat(head(2), h("02 00000002 00000001 00000009 00000009 6162"))},
		{"trailing-byte", "a complete OK value followed by one byte", cat(ok, h("00"))},
	}
}

func genPELValue() ([]Vector, error) {
	var l vectorList
	for _, c := range valueCases() {
		b, err := pel.EncodeResultValue(c.v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		vv, bh := valueToVec(c.v), Hex(b)
		l.add("pel.value.encode."+c.name, "encode: "+c.desc, specValue, KindResultValueEncode, valueInput{Value: &vv}, valueBytesJSON{ValueBytes: &bh})
	}
	for _, c := range valueCases() {
		b, _ := pel.EncodeResultValue(c.v)
		v, err := pel.DecodeResultValue(b)
		if err != nil {
			return nil, fmt.Errorf("%s: own encoding rejected: %w", c.name, err)
		}
		vv, bh := valueToVec(v), Hex(b)
		l.add("pel.value.decode."+c.name, "decode and re-encode: "+c.desc, specValue, KindResultValueDecode, valueBytesJSON{ValueBytes: &bh}, valueDecodeExpect{Value: &vv})
	}
	for _, c := range valueRejects() {
		_, err := pel.DecodeResultValue(c.in)
		var de *enc.DecodeError
		if !errors.As(err, &de) {
			return nil, fmt.Errorf("value reject case %s: %v", c.name, err)
		}
		in := Hex(c.in)
		l.add("pel.value.reject."+c.name, "reject: "+c.desc, specValue, KindResultValueDecode, valueBytesJSON{ValueBytes: &in}, rejectExpect{RejectOf(err, "")})
	}
	return l.vs, l.err
}

func genPELDescriptor() ([]Vector, error) {
	var l vectorList
	other := pel.DescriptorDAG1
	other.SchemeID, other.GlobalParams, other.OpRegistry = "ACME/OTHER-SCHEME/9", pel.GlobalParamsIgnored, ""
	cases := []struct {
		name, desc string
		d          pel.Descriptor
	}{
		{"dag1", "the PEL/PROGRAM-DAG-DESC/1 descriptor of this scheme (its reference is SchemeRef_DAG_1)", pel.DescriptorDAG1},
		{"other", "a descriptor of another scheme: global params ignored, empty op_registry", other},
	}
	for _, c := range cases {
		b := pel.EncodeDescriptor(c.d)
		dv, bh := descriptorToVec(c.d), Hex(b)
		l.add("pel.descriptor.encode."+c.name, "encode: "+c.desc, specDescriptor, KindDescriptorEncode, descriptorInput{Descriptor: &dv},
			descriptorEncodeExpect{DescriptorBytes: &bh, Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(pel.TagSchemeDescriptor, b)).String()})
		l.add("pel.descriptor.decode."+c.name, "decode and re-encode: "+c.desc, specDescriptor, KindDescriptorDecode, descriptorBytesInput{DescriptorBytes: &bh},
			descriptorDecodeExpect{Descriptor: &dv})
	}
	full := pel.EncodeDescriptor(pel.DescriptorDAG1)
	for _, c := range []bytesCase{
		{"empty", "no bytes: descriptor_id missing", nil},
		{"id-past-end", "descriptor_id length 22 with 3 bytes following", h("00000016 504543")},
		{"truncated", "the descriptor without its last field (global_params)", full[:len(full)-1]},
		{"global-params-02", "global_params 0x02", cat(full[:len(full)-1], h("02"))},
		{"trailing-byte", "the descriptor followed by one byte", cat(full, h("00"))},
	} {
		_, err := pel.DecodeDescriptor(c.in)
		if err == nil {
			return nil, fmt.Errorf("descriptor reject case %s accepted", c.name)
		}
		in := Hex(c.in)
		l.add("pel.descriptor.reject."+c.name, "reject: "+c.desc, specDescriptor, KindDescriptorDecode, descriptorBytesInput{DescriptorBytes: &in}, rejectExpect{RejectOf(err, "")})
	}
	d := pel.SchemeDescriptor()
	tag, db := uint32(d.Tag), Hex(d.Bytes)
	l.add("pel.descriptor.scheme-ref-dag-1", "SchemeRef_DAG_1: the SHA-256 reference of the descriptor artifact (tag 0x00000100)", specDescriptor, KindSchemeRefDAG1,
		struct{}{}, schemeRefExpect{TypeTag: &tag, DescriptorBytes: &db, SchemeRef: pel.SchemeRefDAG1.String()})
	return l.vs, l.err
}
