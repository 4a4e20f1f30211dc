package pel_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/internal/golden"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// golden compares got with testdata/name, or rewrites it under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, "testdata/"+name, got)
}

func TestSeedsGolden(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# seed program: name, SHA-256 reference of the program artifact (tag 0x00000101), ProgramBytes hex\n")
	for _, name := range pel.SeedNames() {
		a, err := pel.SeedArtifact(name)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s\n", name, asl.MustDerive(asl.HashSHA256, a), hex.EncodeToString(a.Bytes))
		p, err := pel.DecodeProgramArtifact(a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, _ := pel.Seed(name)
		if !p.Equal(want) {
			t.Fatalf("%s: decode(encode(p)) != p", name)
		}
	}
	checkGolden(t, "seeds.txt", []byte(b.String()))
	if _, err := pel.Seed("nope"); err == nil {
		t.Fatal("unknown seed accepted")
	}
}

func TestProgramRoundTrip(t *testing.T) {
	t.Parallel()
	progs := []pel.Program{
		{},
		{Roots: []pel.RootRef{}},
		chain(t, 5),
		fanIn(t, 6),
		{Nodes: []pel.Node{
			{ID: 0, Op: pel.OperationID{Name: "acme.é", Version: 0xffffffff}, Inputs: []pel.DagInput{pel.External(0xffffffff), pel.FromNode(0xffffffff, 7)}, Params: []byte{1, 2, 3}},
			{ID: 0xffffffff, Op: opreg.OpHash},
		}, Roots: []pel.RootRef{{NodeID: 9, OutputIndex: 9}, {NodeID: 0, OutputIndex: 0}}},
	}
	for i, p := range progs {
		b, err := pel.EncodeProgram(p)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		q, err := pel.DecodeProgram(b)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !q.Equal(p) {
			t.Fatalf("%d: decode(encode(p)) = %+v, want %+v", i, q, p)
		}
		b2, err := pel.EncodeProgram(q)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("%d: encode(decode(b)) differs", i)
		}
	}
}

func TestEmptyProgramBytes(t *testing.T) {
	t.Parallel()
	b, err := pel.EncodeProgram(pel.Program{})
	if err != nil || hex.EncodeToString(b) != "0000000000000000" {
		t.Fatalf("%x %v", b, err)
	}
}

// Every strict prefix and every one-byte extension of a valid encoding is
// rejected.
func TestProgramPrefixesAndExtensions(t *testing.T) {
	t.Parallel()
	for _, name := range pel.SeedNames() {
		a, _ := pel.SeedArtifact(name)
		for n := 0; n < len(a.Bytes); n++ {
			if _, err := pel.DecodeProgram(a.Bytes[:n]); err == nil {
				t.Fatalf("%s: prefix of %d bytes accepted", name, n)
			}
		}
		if _, err := pel.DecodeProgram(append(append([]byte{}, a.Bytes...), 0)); err == nil {
			t.Fatalf("%s: trailing byte accepted", name)
		}
	}
}

func TestDecodeProgramRejects(t *testing.T) {
	t.Parallel()
	valid := rawNode{id: 1, name: "pel.bytes.const", version: 1, params: unhex(t, "000000000568656c6c6f")}
	with := func(mod func(*rawNode)) rawNode { n := valid; mod(&n); return n }
	long := strings.Repeat("a", 256)
	tests := []struct {
		name   string
		bytes  []byte
		code   uint32
		field  string
		offset int
	}{
		{"empty input", nil, pel.DiagProgramMalformed, "node_count", 0},
		{"truncated count", unhex(t, "000000"), pel.DiagProgramMalformed, "node_count", 0},
		{"node count past end", unhex(t, "00000001"), pel.DiagProgramMalformed, "node_count", 0},
		{"2^32-1 nodes", append(unhex(t, "ffffffff"), make([]byte, 64)...), pel.DiagProgramMalformed, "node_count", 0},
		{"missing roots", unhex(t, "00000000"), pel.DiagProgramMalformed, "root_count", 4},
		{"root count past end", unhex(t, "000000000000000100000001"), pel.DiagProgramMalformed, "root_count", 4},
		{"trailing byte", unhex(t, "000000000000000000"), pel.DiagProgramMalformed, "end of input", 8},
		{"empty op name", rawProgram([]rawNode{with(func(n *rawNode) { n.name = "" })}), pel.DiagProgramMalformed, "op_name", 8},
		{"op name 256 bytes", rawProgram([]rawNode{with(func(n *rawNode) { n.name = long })}), pel.DiagProgramMalformed, "op_name", 8},
		{"op name not utf8", rawProgram([]rawNode{with(func(n *rawNode) { n.name = "pel.\xff" })}), pel.DiagProgramMalformed, "op_name", 8},
		{"op name past end", unhex(t, "0000000100000001000000ff0000000000000000000000000000000000"), pel.DiagProgramMalformed, "op_name", 8},
		{"input count past end", rawProgram([]rawNode{with(func(n *rawNode) { n.inputs = [][]byte{extIn(0), extIn(1)} })})[:40], pel.DiagProgramMalformed, "input_count", 31},
		{"input tag 2", rawProgram([]rawNode{with(func(n *rawNode) { n.inputs = [][]byte{{2, 0, 0, 0, 0}} })}), pel.DiagProgramMalformed, "input_tag", 35},
		{"input tag ff", rawProgram([]rawNode{with(func(n *rawNode) { n.inputs = [][]byte{{0xff, 0, 0, 0, 0}} })}), pel.DiagProgramMalformed, "input_tag", 35},
		{"truncated node input", rawProgram([]rawNode{with(func(n *rawNode) { n.inputs = [][]byte{nodeIn(1, 0)} })})[:42], pel.DiagProgramMalformed, "output_index", 40},
		{"params past end", rawProgram([]rawNode{with(func(n *rawNode) { n.params = nil })})[:35], pel.DiagProgramMalformed, "params length", 35},
		{"duplicate node id", rawProgram([]rawNode{valid, valid}), pel.DiagDuplicateNodeID, "node_id", 49},
		{"descending node ids", rawProgram([]rawNode{with(func(n *rawNode) { n.id = 2 }), valid}), pel.DiagNodeOrder, "node_id", 49},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pel.DecodeProgram(tt.bytes)
			var pe *pel.ProgramError
			var de *enc.DecodeError
			if !errors.As(err, &pe) || !errors.As(err, &de) {
				t.Fatalf("err = %v, want a *ProgramError wrapping *enc.DecodeError", err)
			}
			if !errors.Is(err, pel.ErrInvalidProgram) || !errors.Is(err, enc.ErrMalformed) {
				t.Fatalf("err %v does not wrap ErrInvalidProgram and enc.ErrMalformed", err)
			}
			if pe.Code != tt.code || de.Field != tt.field || de.Offset != tt.offset {
				t.Fatalf("code %d field %q offset %d (%v); want %d %q %d", pe.Code, de.Field, de.Offset, err, tt.code, tt.field, tt.offset)
			}
		})
	}
}

func TestCheckEncodable(t *testing.T) {
	t.Parallel()
	ok := constNode(t, 1, "a")
	tests := []struct {
		name string
		p    pel.Program
		code uint32
	}{
		{"duplicate", pel.Program{Nodes: []pel.Node{ok, ok}}, pel.DiagDuplicateNodeID},
		{"descending", pel.Program{Nodes: []pel.Node{constNode(t, 2, "a"), ok}}, pel.DiagNodeOrder},
		{"empty name", pel.Program{Nodes: []pel.Node{{ID: 1}}}, pel.DiagProgramMalformed},
		{"bad kind", pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpHash, Inputs: []pel.DagInput{{Kind: 2}}}}}, pel.DiagProgramMalformed},
		{"external with node id", pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpHash, Inputs: []pel.DagInput{{Kind: pel.InputExternal, NodeID: 3}}}}}, pel.DiagProgramMalformed},
		{"node with input index", pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpHash, Inputs: []pel.DagInput{{Kind: pel.InputNode, InputIndex: 3}}}}}, pel.DiagProgramMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pel.EncodeProgram(tt.p)
			var pe *pel.ProgramError
			if !errors.As(err, &pe) || pe.Code != tt.code {
				t.Fatalf("err %v, want code %d", err, tt.code)
			}
		})
	}
}

// A few bytes claiming 2^32-1 nodes fail without allocating for them.
func TestHugeCountNoAllocation(t *testing.T) {
	b := append(unhex(t, "ffffffff"), make([]byte, 20)...)
	a := asl.Tagged(asl.TagPELProgramDAG1, b)
	allocs := testing.AllocsPerRun(100, func() {
		if _, res := pel.ExecDAG(nil, a, nil, nil, nil); res.Status != pel.StatusInvalidProgram {
			t.Fatalf("status %s", res.Status)
		}
	})
	if allocs > 16 {
		t.Fatalf("%v allocations for a rejected 24-byte program", allocs)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 100; i++ {
		pel.ExecDAG(nil, a, nil, nil, nil)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 4096 {
		t.Fatalf("%d bytes allocated per rejected 24-byte program", per)
	}
}

// Decoding allocates at most a small multiple of the input size.
func TestDecodeAllocationBound(t *testing.T) {
	p := chain(t, 10000)
	b, err := pel.EncodeProgram(p)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := pel.DecodeProgram(b); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(8*len(b)) {
		t.Fatalf("decoding %d bytes allocated %d", len(b), got)
	}
}

func FuzzDecodeProgram(f *testing.F) {
	for _, name := range pel.SeedNames() {
		a, _ := pel.SeedArtifact(name)
		f.Add(a.Bytes)
	}
	f.Add(unhex(f, "ffffffff0000000000000000"))
	f.Add(rawProgram([]rawNode{{id: 2, name: "x", params: nil}, {id: 1, name: "y"}}))
	f.Add(rawProgram([]rawNode{{id: 1, name: "x", inputs: [][]byte{nodeIn(1, 0), extIn(3)}}}, [2]uint32{1, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := pel.DecodeProgram(b)
		if err != nil {
			var pe *pel.ProgramError
			if !errors.As(err, &pe) || !errors.Is(err, enc.ErrMalformed) {
				t.Fatalf("error %v is not a decode *ProgramError", err)
			}
			return
		}
		back, err := pel.EncodeProgram(p)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("encode(decode(b)) = %x, %v; want %x", back, err, b)
		}
		// Every decoded program is encodable, so its JSON form parses
		// back to it.
		j, err := pel.ProgramToJSON(p, nil)
		if err != nil {
			t.Fatalf("decoded program does not render as JSON: %v", err)
		}
		if q, err := pel.ProgramFromJSON(j, nil); err != nil || !q.Equal(p) {
			t.Fatalf("JSON round trip via %s: %v", j, err)
		}
		// Structure checking and ordering never panic on decoded programs.
		if order, err := pel.CanonicalOrder(p); err == nil && len(order) != len(p.Nodes) {
			t.Fatalf("order has %d nodes, program %d", len(order), len(p.Nodes))
		}
	})
}
