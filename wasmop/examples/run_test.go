package examples_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/wasmcachetest"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/examples"
)

// examplePages is the memory limit of every run.
const examplePages = 2048

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// runCase is one run of an example through amduat.wasm.run: data inputs
// (files under testdata/ or literal text), and the golden file the
// result summary must equal.
type runCase struct {
	name    string
	example string
	inputs  []string // "@file" names testdata/file, anything else is the bytes
}

var runCases = []runCase{
	{name: "wordcount-decimal", example: "wordcount", inputs: []string{"@words.txt"}},
	{name: "wordcount-u64be", example: "wordcount", inputs: []string{"@words.txt", "u64be"}},
	{name: "wordcount-u64le-empty", example: "wordcount", inputs: []string{"", "u64le"}},
	{name: "wordcount-bad-encoding", example: "wordcount", inputs: []string{"@words.txt", "hex"}},
	{name: "wordcount-no-input", example: "wordcount", inputs: nil},
	{name: "jsonfield-member", example: "jsonfield", inputs: []string{"@doc.json", "/items/1"}},
	{name: "jsonfield-escaped", example: "jsonfield", inputs: []string{"@doc.json", "/a~1b/m~0n"}},
	{name: "jsonfield-whole", example: "jsonfield", inputs: []string{"@doc.json", ""}},
	{name: "jsonfield-not-found", example: "jsonfield", inputs: []string{"@doc.json", "/items/3"}},
	{name: "jsonfield-bad-pointer", example: "jsonfield", inputs: []string{"@doc.json", "items"}},
	{name: "jsonfield-bad-json", example: "jsonfield", inputs: []string{"@words.txt", ""}},
	{name: "jsonfield-one-input", example: "jsonfield", inputs: []string{"@doc.json"}},
	{name: "thumbnail-png", example: "thumbnail", inputs: []string{"@photo.png", "64"}},
	{name: "thumbnail-jpeg-default", example: "thumbnail", inputs: []string{"@photo.jpg"}},
	{name: "thumbnail-not-image", example: "thumbnail", inputs: []string{"@words.txt"}},
	{name: "thumbnail-bad-bound", example: "thumbnail", inputs: []string{"@photo.png", "0"}},
}

func example(t *testing.T, name string) examples.Example {
	for _, ex := range examples.All() {
		if ex.Name == name {
			return ex
		}
	}
	t.Fatalf("no example %q", name)
	return examples.Example{}
}

// program is a one-node program running export of the module (input 0)
// on inputs 1..n.
func program(t testing.TB, p wasmop.Params, dataInputs int) asl.Artifact {
	params, err := wasmop.EncodeParams(p)
	if err != nil {
		t.Fatal(err)
	}
	ins := []pel.DagInput{pel.External(0)}
	for i := range dataInputs {
		ins = append(ins, pel.External(uint32(i+1)))
	}
	var roots []pel.RootRef
	for o := range p.Outputs {
		roots = append(roots, pel.RootRef{NodeID: 1, OutputIndex: o})
	}
	art, err := pel.ProgramArtifact(pel.Program{Nodes: []pel.Node{{ID: 1, Op: wasmop.OpID, Inputs: ins, Params: params}}, Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	return art
}

// summary renders an execution: status, status code, diagnostics and
// outputs (size, SHA-256, and the bytes when they are short text).
func summary(outs []asl.Artifact, res pel.ExecutionResultValue) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "status %s\nstatus_code 0x%08x\n", res.Status, res.Summary.StatusCode)
	for _, d := range res.Diagnostics {
		fmt.Fprintf(&b, "diagnostic 0x%08x %s\n", d.Code, strconv.Quote(string(d.Message)))
	}
	for i, o := range outs {
		fmt.Fprintf(&b, "output %d size %d sha256 %x\n", i, len(o.Bytes), sha256.Sum256(o.Bytes))
		if len(o.Bytes) <= 256 {
			fmt.Fprintf(&b, "  bytes %s\n", strconv.Quote(string(o.Bytes)))
		}
	}
	return b.Bytes()
}

// TestExamplesThroughHost runs the checked-in example modules through
// amduat.wasm.run (pel.ExecDAG with the kernel plus the operation) and
// compares each run with testdata/NAME.golden (go test -update rewrites
// them). Thumbnails are also decoded and their size checked.
func TestExamplesThroughHost(t *testing.T) {
	testExamples(t, false)
}

// TestExamplesInterpreter runs the same cases under wazero's interpreter
// against the same golden files: compiler and interpreter agree byte for
// byte (about 3 s; minutes under -race, where it is skipped: the
// compiler run above and wasmop's TestExampleModulesDeterminism still run).
func TestExamplesInterpreter(t *testing.T) {
	if raceEnabled {
		t.Skip("the interpreter under the race detector takes minutes")
	}
	testExamples(t, true)
}

// testExamples runs runCases on one engine. The compiler's engine reads
// the modules from the compilation cache the tests of wasmop and its
// examples share (internal/wasmcachetest), compiling each there once.
func testExamples(t *testing.T, interpreter bool) {
	ctx := context.Background()
	opts := wasmop.Options{Interpreter: interpreter}
	if !interpreter {
		dir, err := wasmcachetest.Dir()
		if err != nil {
			t.Logf("no shared compilation cache (%v): compiling each example here", err)
		} else {
			opts.CacheDir = dir
			for _, ex := range examples.All() {
				if err := wasmcachetest.Warm(dir, ex.Module, examplePages); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	reg, done, err := wasmop.KernelRegistry(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for _, tc := range runCases {
		t.Run(tc.name, func(t *testing.T) {
			ex := example(t, tc.example)
			inputs := []asl.Artifact{asl.Untagged(ex.Module)}
			for _, in := range tc.inputs {
				b := []byte(in)
				if name, ok := bytes.CutPrefix(b, []byte("@")); ok {
					if b, err = os.ReadFile(filepath.Join("testdata", string(name))); err != nil {
						t.Fatal(err)
					}
				}
				inputs = append(inputs, asl.Untagged(b))
			}
			p := wasmop.Params{Export: ex.Export, Outputs: ex.Outputs, MaxMemoryPages: examplePages, MaxOutputBytes: 1 << 20}
			outs, res := pel.ExecDAG(reg, program(t, p, len(tc.inputs)), inputs, nil, nil)
			got := summary(outs, res)
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update && !interpreter {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("run differs from %s:\n got:\n%s\nwant:\n%s", golden, got, want)
			}
			if tc.example == "thumbnail" && res.Status == pel.StatusOK {
				img, err := png.Decode(bytes.NewReader(outs[0].Bytes))
				if err != nil {
					t.Fatalf("thumbnail output is not a PNG: %v", err)
				}
				if b := img.Bounds(); max(b.Dx(), b.Dy()) > 128 {
					t.Errorf("thumbnail is %v, above the bound", b)
				}
			}
		})
	}
}
