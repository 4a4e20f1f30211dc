package pel_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

func TestJSONSeedsGolden(t *testing.T) {
	t.Parallel()
	var all bytes.Buffer
	for _, name := range pel.SeedNames() {
		p, _ := pel.Seed(name)
		j, err := pel.ProgramToJSON(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(j) {
			t.Fatalf("%s: invalid JSON %s", name, j)
		}
		back, err := pel.ProgramFromJSON(j, nil)
		if err != nil || !back.Equal(p) {
			t.Fatalf("%s: round trip %v", name, err)
		}
		fmt.Fprintf(&all, "# %s\n%s", name, j)
	}
	checkGolden(t, "seeds.json.txt", all.Bytes())
}

func TestJSONHandWritten(t *testing.T) {
	t.Parallel()
	src := `{
	  "roots": [{"node": 2}],
	  "nodes": [
	    {"id": 2, "op": "pel.bytes.concat", "version": 1, "inputs": [{"node": 1, "output": 0}, {"input": 0}], "params": null},
	    {"id": 1, "op": "pel.bytes.const", "version": 1, "params": {"hex": "00ff", "type_tag": "0x101"}}
	  ]
	}`
	p, err := pel.ProgramFromJSON([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := opreg.EncodeConstParams(opreg.ConstParams{HasTag: true, Tag: 0x101, Bytes: []byte{0, 0xff}})
	want := pel.Program{Nodes: []pel.Node{
		{ID: 1, Op: opreg.OpConst, Params: cp},
		concatNode(2, pel.FromNode(1, 0), pel.External(0)),
	}, Roots: root(2)}
	if !p.Equal(want) {
		t.Fatalf("got %+v\nwant %+v", p, want)
	}
	outs, res := pel.ExecDAG(nil, mustArtifact(t, p), []asl.Artifact{helloIn}, nil, nil)
	if res.Status != pel.StatusOK || !bytes.Equal(outs[0].Bytes, []byte("\x00\xffhello")) {
		t.Fatalf("%s %v", res.Status, outs)
	}
	canon, err := pel.ProgramToJSON(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := "{\"nodes\":[\n" +
		"  {\"id\":1,\"op\":\"pel.bytes.const\",\"version\":1,\"params\":{\"hex\":\"00ff\",\"type_tag\":\"0x00000101\"}},\n" +
		"  {\"id\":2,\"op\":\"pel.bytes.concat\",\"version\":1,\"inputs\":[{\"node\":1,\"output\":0},{\"input\":0}]}\n" +
		"],\"roots\":[{\"node\":2,\"output\":0}]}\n"
	if string(canon) != wantJSON {
		t.Fatalf("ProgramToJSON:\n%s\nwant:\n%s", canon, wantJSON)
	}
}

func TestJSONRawParams(t *testing.T) {
	t.Parallel()
	// Unknown operations and undecodable kernel params use the raw form,
	// and still round-trip.
	p := pel.Program{Nodes: []pel.Node{
		{ID: 1, Op: pel.OperationID{Name: "acme.thing", Version: 3}, Params: []byte{1, 2}},
		{ID: 2, Op: pel.OperationID{Name: "acme.thing", Version: 3}, Params: []byte{}},
		{ID: 3, Op: opreg.OpConcat, Params: []byte{7}},
		{ID: 4, Op: opreg.OpConst, Params: []byte{9}},
	}}
	j, err := pel.ProgramToJSON(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`"id":1,"op":"acme.thing","version":3,"params":{"raw":"0102"}}`, `"id":2,"op":"acme.thing","version":3}`, `"params":{"raw":"07"}`, `"params":{"raw":"09"}`} {
		if !strings.Contains(string(j), frag) {
			t.Fatalf("%s lacks %s", j, frag)
		}
	}
	back, err := pel.ProgramFromJSON(j, nil)
	if err != nil || !back.Equal(p) {
		t.Fatalf("round trip: %v", err)
	}
	// The raw form is accepted for kernel operations too.
	q, err := pel.ProgramFromJSON([]byte(`{"nodes":[{"id":1,"op":"pel.bytes.slice","version":1,"inputs":[{"input":0}],"params":{"raw":"00000000000000010000000000000003"}}],"roots":[{"node":1}]}`), nil)
	s, _ := pel.Seed(pel.SeedSlice)
	if err != nil || !q.Equal(s) {
		t.Fatalf("raw slice params: %v", err)
	}
}

func TestJSONUserOperation(t *testing.T) {
	t.Parallel()
	reg, err := opreg.Kernel().Extend(opreg.Operation{
		ID:        pel.OperationID{Name: "acme.repeat", Version: 1},
		MinInputs: 1, MaxInputs: 1,
		DecodeParams: func(b []byte) (any, error) {
			if len(b) != 1 {
				return nil, fmt.Errorf("want 1 byte")
			}
			return int(b[0]), nil
		},
		EncodeParams: func(v any) ([]byte, error) { return []byte{byte(v.(int))}, nil },
		Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			return []asl.Artifact{asl.Untagged(bytes.Repeat(c.Inputs[0].Bytes, c.Params.(int)))}, nil
		},
		ParamsToJSON: func(v any) ([]byte, error) { return []byte(fmt.Sprintf(`{"times":%d}`, v.(int))), nil },
		ParamsFromJSON: func(raw []byte) (any, error) {
			var j struct{ Times int }
			err := json.Unmarshal(raw, &j)
			return j.Times, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	src := `{"nodes":[{"id":7,"op":"acme.repeat","version":1,"inputs":[{"input":0}],"params":{"times":3}}],"roots":[{"node":7,"output":0}]}`
	p, err := pel.ProgramFromJSON([]byte(src), reg)
	if err != nil {
		t.Fatal(err)
	}
	outs, res := pel.ExecDAG(reg, mustArtifact(t, p), []asl.Artifact{asl.Untagged([]byte("ab"))}, nil, nil)
	if res.Status != pel.StatusOK || string(outs[0].Bytes) != "ababab" {
		t.Fatalf("%s %v", res.Status, outs)
	}
	j, _ := pel.ProgramToJSON(p, reg)
	if !strings.Contains(string(j), `"params":{"times":3}`) {
		t.Fatalf("readable user params missing: %s", j)
	}
	// Without the user registry the same program renders raw.
	j, _ = pel.ProgramToJSON(p, nil)
	if !strings.Contains(string(j), `"params":{"raw":"03"}`) {
		t.Fatalf("raw fallback missing: %s", j)
	}
}

func TestJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, src string }{
		{"not json", `{`},
		{"trailing", `{"nodes":[],"roots":[]} {}`},
		{"trailing brace", `{"nodes":[],"roots":[]}}`},
		{"trailing bracket", `{"nodes":[],"roots":[]}]`},
		{"trailing brace after white space", "{\"nodes\":[]}\n}"},
		{"unknown member", `{"nodes":[],"roots":[],"x":1}`},
		{"unknown node member", `{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"a"},"extra":0}]}`},
		{"missing id", `{"nodes":[{"op":"pel.bytes.const","version":1,"params":{"text":"a"}}]}`},
		{"missing version", `{"nodes":[{"id":1,"op":"pel.bytes.const","params":{"text":"a"}}]}`},
		{"negative id", `{"nodes":[{"id":-1,"op":"pel.bytes.const","version":1,"params":{"text":"a"}}]}`},
		{"id too large", `{"nodes":[{"id":4294967296,"op":"pel.bytes.const","version":1,"params":{"text":"a"}}]}`},
		{"empty op", `{"nodes":[{"id":1,"op":"","version":1}]}`},
		{"duplicate ids", `{"nodes":[{"id":1,"op":"x","version":1},{"id":1,"op":"y","version":1}]}`},
		{"ambiguous input", `{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"input":0,"node":1}]}]}`},
		{"empty input", `{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{}]}]}`},
		{"root without node", `{"nodes":[],"roots":[{"output":1}]}`},
		{"bad readable params", `{"nodes":[{"id":1,"op":"pel.bytes.slice","version":1,"params":{"offset":1}}]}`},
		{"params for empty op", `{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"params":{"x":1}}]}`},
		{"readable params for unknown op", `{"nodes":[{"id":1,"op":"acme.x","version":1,"params":{"x":1}}]}`},
		{"bad raw hex", `{"nodes":[{"id":1,"op":"acme.x","version":1,"params":{"raw":"zz"}}]}`},
		{"raw not string", `{"nodes":[{"id":1,"op":"acme.x","version":1,"params":{"raw":1}}]}`},
		{"const too large", `{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"` + strings.Repeat("a", opreg.MaxConstBytes+1) + `"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := pel.ProgramFromJSON([]byte(tt.src), nil); err == nil {
				t.Fatalf("accepted: %+v", p)
			}
		})
	}
}

func FuzzProgramFromJSON(f *testing.F) {
	for _, name := range pel.SeedNames() {
		p, _ := pel.Seed(name)
		j, _ := pel.ProgramToJSON(p, nil)
		f.Add(j)
	}
	f.Add([]byte(`{"nodes":[{"id":1,"op":"acme.x","version":1,"params":{"raw":"00"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := pel.ProgramFromJSON(b, nil)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted %q, which is not one JSON value", b)
		}
		j, err := pel.ProgramToJSON(p, nil)
		if err != nil {
			t.Fatalf("accepted program does not render: %v", err)
		}
		q, err := pel.ProgramFromJSON(j, nil)
		if err != nil || !q.Equal(p) {
			t.Fatalf("round trip via %s: %v", j, err)
		}
		if again, err := pel.ProgramToJSON(q, nil); err != nil || !bytes.Equal(again, j) {
			t.Fatalf("rendering is not stable: %s, then %s (%v)", j, again, err)
		}
		if _, err := pel.EncodeProgram(p); err != nil {
			t.Fatalf("accepted program does not encode: %v", err)
		}
	})
}

// TestJSONMemberNamesExact: member names match exactly (SPECS.md §15):
// case variants, Unicode case folds and duplicates are rejected, in the
// program and in readable params, while the exact form parses.
func TestJSONMemberNamesExact(t *testing.T) {
	t.Parallel()
	if _, err := pel.ProgramFromJSON([]byte(`{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"a"}}],"roots":[{"node":1}]}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"Nodes":[]}`,
		`{"nodes":[{"ID":1,"op":"pel.bytes.const","version":1}]}`,
		`{"rootſ":[]}`,
		`{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"TEXT":"a"}}]}`,
		`{"nodes":[{"id":1,"op":"acme.x","version":1,"params":{"RAW":"00"}}]}`,
		`{"nodes":[],"nodes":[]}`,
		`{"nodes":[{"id":1,"id":2,"op":"acme.x","version":1}]}`,
		`{"nodes":[{"id":1,"op":"pel.bytes.slice","version":1,"params":{"offset":0,"offset":1,"length":1}}]}`,
	} {
		if p, err := pel.ProgramFromJSON([]byte(bad), nil); err == nil {
			t.Errorf("%s parsed: %+v", bad, p)
		}
	}
}

// TestJSONNotObjects: a program, node, input or root that is not an
// object, and "nodes", "roots" or "inputs" that are not arrays, are refused
// with the field named, never taken for an empty value (issue 20).
func TestJSONNotObjects(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{`null`, "the program: want an object, got null"},
		{` [] `, "the program: want an object, got an array"},
		{`"x"`, "the program: want an object, got a string"},
		{`1`, "the program: want an object, got a number"},
		{`true`, "the program: want an object, got a boolean"},
		{`{"nodes":null}`, `"nodes": want an array, got null`},
		{`{"nodes":{}}`, `"nodes": want an array, got an object`},
		{`{"roots":null}`, `"roots": want an array, got null`},
		{`{"nodes":[null]}`, "nodes[0]: want an object, got null"},
		{`{"nodes":[],"roots":[null]}`, "roots[0]: want an object, got null"},
		{`{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"inputs":null}]}`, `nodes[0] "inputs": want an array, got null`},
		{`{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"inputs":[null]}]}`, "nodes[0].inputs[0]: want an object, got null"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := pel.ProgramFromJSON([]byte(tt.src), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	// An empty object is still the empty program, params null still the
	// default.
	for _, ok := range []string{`{}`, `{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1,"params":null}]}`} {
		if _, err := pel.ProgramFromJSON([]byte(ok), nil); err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
	}
}
