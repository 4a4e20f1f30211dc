package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

func TestPELExitCodes(t *testing.T) {
	want := map[pel.ExecutionStatus]int{
		pel.StatusOK: 0, pel.StatusSchemeUnsupported: 11, pel.StatusInvalidProgram: 12,
		pel.StatusInvalidInputs: 13, pel.StatusRuntimeFailed: 14,
	}
	for s, code := range want {
		if got := pelExitCode(s); got != code {
			t.Errorf("pelExitCode(%s) = %d, want %d", s, got, code)
		}
		if s != pel.StatusOK && !strings.Contains(pelExitCodeHelp, s.String()) {
			t.Errorf("exit code help lacks %s", s)
		}
	}
}

// Every seed has a --list entry whose input count is what the program reads.
func TestPELSeedInfo(t *testing.T) {
	if len(pelSeedInfo) != len(pel.SeedNames()) {
		t.Fatalf("%d seed descriptions for %d seeds", len(pelSeedInfo), len(pel.SeedNames()))
	}
	for _, name := range pel.SeedNames() {
		p, err := pel.Seed(name)
		if err != nil {
			t.Fatal(err)
		}
		reads := 0
		for _, n := range p.Nodes {
			for _, in := range n.Inputs {
				if in.Kind == pel.InputExternal && int(in.InputIndex)+1 > reads {
					reads = int(in.InputIndex) + 1
				}
			}
		}
		n, err := pelSeedInputs(name)
		if err != nil || n != reads {
			t.Errorf("seed %s: listed with %d inputs (%v), reads %d", name, n, err, reads)
		}
	}
	if _, err := pelSeedInputs("nope"); err == nil {
		t.Error("unknown seed has an input count")
	}
}

func TestLineCol(t *testing.T) {
	data := []byte("ab\ncde\n\nf")
	for _, tt := range []struct{ off, line, col int }{
		{0, 1, 1}, {1, 1, 1}, {2, 1, 2}, {3, 1, 3}, {4, 2, 1}, {6, 2, 3}, {8, 3, 1}, {9, 4, 1}, {99, 4, 1},
	} {
		if l, c := lineCol(data, tt.off); l != tt.line || c != tt.col {
			t.Errorf("lineCol(%d) = %d:%d, want %d:%d", tt.off, l, c, tt.line, tt.col)
		}
	}
}

func TestPrintableTextAndDOTQuote(t *testing.T) {
	for _, tt := range []struct{ in, text, dot string }{
		{"plain é", "plain é", `"plain é"`},
		{`a"b\c`, `a"b\c`, `"a\"b\\c"`},
		{"tab\there", `"tab\there"`, `"\"tab\\there\""`},
		{"bad \xff", `"bad \xff"`, `"\"bad \\xff\""`},
		{"two\nlines", `"two\nlines"`, `"two\nlines"`},
	} {
		if got := printableText([]byte(tt.in)); got != tt.text {
			t.Errorf("printableText(%q) = %s, want %s", tt.in, got, tt.text)
		}
		if got := dotQuote(tt.in); got != tt.dot {
			t.Errorf("dotQuote(%q) = %s, want %s", tt.in, got, tt.dot)
		}
	}
}

// The DOT of one program is identical however often it is rendered, and
// with a trace, colours follow the records.
func TestProgramDOTDeterministic(t *testing.T) {
	p, err := pel.ProgramFromJSON([]byte(`{"nodes":[
	  {"id":5,"op":"pel.bytes.concat","version":1,"inputs":[{"input":2},{"node":3},{"input":0}]},
	  {"id":3,"op":"pel.bytes.const","version":1,"params":{"text":"x"}},
	  {"id":9,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"node":5}]}
	],"roots":[{"node":9},{"node":3}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	first := programDOT(p, "t", nil)
	for i := 0; i < 20; i++ {
		if !bytes.Equal(programDOT(p, "t", nil), first) {
			t.Fatal("DOT output differs between renderings")
		}
	}
	s := string(first)
	for _, want := range []string{"in0 [", "in2 [", "in2 -> n5 [label=\"in 0\"]", "n3 -> n5 [label=\"out 0 -> in 1\"]", "n9 -> out0", "n3 -> out1"} {
		if !strings.Contains(s, want) {
			t.Errorf("DOT lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "in0 [") > strings.Index(s, "in2 [") || strings.Index(s, "n3 [") > strings.Index(s, "n5 [") {
		t.Errorf("DOT declarations not in ascending order:\n%s", s)
	}
	tr := &trace.Trace{Status: pel.StatusRuntimeFailed, StatusCode: 0x30001, Nodes: []trace.NodeRecord{
		{NodeID: 3, Op: opreg.OpConst, Status: pel.StatusOK},
		{NodeID: 5, Op: opreg.OpConcat, Status: pel.StatusRuntimeFailed, StatusCode: 0x30001},
	}}
	s = string(programDOT(p, "t", tr))
	for _, want := range []string{
		`n3 [fillcolor=palegreen, label="node 3\npel.bytes.const@1\nOK"]`,
		`n5 [fillcolor=lightcoral, label="node 5\npel.bytes.concat@1\nRUNTIME_FAILED status_code 0x00030001"]`,
		`n9 [fillcolor=lightgrey, style="rounded,filled,dashed", label="node 9\npel.bytes.hash.asl1@1\nnot evaluated"]`,
		`label="input 0\nnot given"`,
		`label="t\nstatus RUNTIME_FAILED status_code 0x00030001"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("traced DOT lacks %q:\n%s", want, s)
		}
	}
}
