package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/amduat/amduat/internal/golden"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/report"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// End-to-end tests of `amduat pel` through the binary built by TestMain
// (e2e_test.go), with its cli helpers.

// putData stores data (untagged, or with the given tag) and returns its
// reference text.
func (c *cli) putData(data []byte, tag ...string) string {
	c.t.Helper()
	args := []string{"put"}
	if len(tag) > 0 {
		args = append(args, "--type-tag", tag[0])
	}
	r := c.runIn(bytes.NewReader(data), args...)
	if r.code != 0 {
		c.t.Fatalf("put: exit %d: %s", r.code, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

// runLines parses the default output of pel run into key -> value.
func runLines(t *testing.T, stdout string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		k, v, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("pel run line %q has no value", l)
		}
		if _, dup := m[k]; dup {
			t.Fatalf("pel run repeats %q in %q", k, stdout)
		}
		m[k] = v
	}
	return m
}

func sha(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func untaggedRef(b []byte) string { return asl.MustDerive(asl.HashSHA256, asl.Untagged(b)).String() }

func TestPELSeedList(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	// --list needs no store.
	r := c.must(0, "pel", "seed", "--list")
	var names []string
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 3 || f[2] == "" {
			t.Fatalf("seed --list line %q is not NAME<TAB>INPUTS<TAB>DESCRIPTION", l)
		}
		names = append(names, f[0])
	}
	if strings.Join(names, " ") != "const concat concat1 slice hash const-hash" {
		t.Fatalf("seed --list names %v", names)
	}
	var lr struct {
		Seeds []pelSeedItem `json:"seeds"`
	}
	oneJSON(t, c.must(0, "--json", "pel", "seed", "--list").stdout, &lr)
	if len(lr.Seeds) != 6 {
		t.Fatalf("seed --list --json: %+v", lr)
	}
	for _, s := range lr.Seeds {
		art, err := pel.SeedArtifact(s.Name)
		if err != nil || s.Ref != asl.MustDerive(asl.HashSHA256, art) || s.Description == "" {
			t.Errorf("seed %+v (%v)", s, err)
		}
	}
	oneErrorLine(t, c.must(exitUsage, "pel", "seed", "--list", "const"), "pel seed")
	oneErrorLine(t, c.must(exitStore, "pel", "seed", "const"), "pel seed")
	c.initStore()
	oneErrorLine(t, c.must(exitUsage, "pel", "seed", "nope"), "pel seed")
	oneErrorLine(t, c.must(exitUsage, "pel", "seed"), "pel seed")
}

// Every seed, stored and run with suitable inputs: the output bytes (via
// get and --output-raw), the output reference, --quiet, --json, and the
// same references on a second run. The output modes (--output-raw,
// --quiet, --json of the repeated run, pel show of the result) follow one
// rule for every program: the default run checks them on two seeds
// (concat, const-hash) and every seed's run and output bytes;
// AMDUAT_LONG=1 checks every mode on every seed (internal/longtest).
func TestPELSeedsRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	hello := c.putData([]byte("hello"))
	space := c.putData([]byte("hello "))
	world := c.putData([]byte("world"))
	tagged := c.putData([]byte("abc"), "7")
	tests := []struct {
		seed   string
		inputs []string
		want   []byte
	}{
		{"const", nil, []byte("hello")},
		{"concat", []string{space, world}, []byte("hello world")},
		{"concat1", []string{tagged}, []byte("abc")},
		{"slice", []string{hello}, []byte("ell")},
		{"hash", []string{world}, sha([]byte("world"))},
		{"const-hash", nil, sha([]byte("hello"))},
	}
	for _, tt := range tests {
		t.Run(tt.seed, func(t *testing.T) {
			c.t = t
			prog := strings.TrimSpace(c.must(0, "pel", "seed", tt.seed).stdout)
			art, _ := pel.SeedArtifact(tt.seed)
			if prog != asl.MustDerive(asl.HashSHA256, art).String() {
				t.Fatalf("seed %s stored as %s", tt.seed, prog)
			}
			args := []string{"pel", "run", "--program", prog}
			for _, in := range tt.inputs {
				args = append(args, "--input", in)
			}
			r := c.must(0, args...)
			m := runLines(t, r.stdout)
			if len(m) != 4 || m["status"] != "OK status_code 0x00000000" || m["output_ref[0]"] != untaggedRef(tt.want) || r.stderr != "" {
				t.Fatalf("run output %q stderr %q, want output %s", r.stdout, r.stderr, untaggedRef(tt.want))
			}
			if got := c.must(0, "get", m["output_ref[0]"]).stdout; got != string(tt.want) {
				t.Fatalf("get output = %q, want %q", got, tt.want)
			}
			if !longtest.Enabled() && tt.seed != "concat" && tt.seed != "const-hash" {
				return
			}
			if got := c.must(0, append(args, "--output-raw")...).stdout; got != string(tt.want) {
				t.Fatalf("--output-raw = %q, want %q", got, tt.want)
			}
			if got := c.must(0, append(args, "--quiet")...).stdout; got != m["output_ref[0]"]+"\n" {
				t.Fatalf("--quiet = %q", got)
			}
			var j report.Run
			oneJSON(t, c.must(0, append([]string{"--json"}, args...)...).stdout, &j)
			if j.Status != "OK" || j.StatusCode != 0 || j.ResultRef.String() != m["result_ref"] || j.TraceRef.String() != m["trace_ref"] ||
				len(j.OutputRefs) != 1 || j.OutputRefs[0].String() != m["output_ref[0]"] || len(j.Diagnostics) != 0 || j.StoreFailure != nil ||
				j.Cache != "hit" || j.EdgeRef.IsZero() {
				t.Fatalf("--json of a repeated request = %+v (want a cache hit), text %v", j, m)
			}
			// The result names the request and the output; the trace is found from it.
			show := runLines(t, c.must(0, "pel", "show", m["result_ref"]).stdout)
			if show["program_ref"] != prog || show["trace_ref"] != m["trace_ref"] || show["output_ref[0]"] != m["output_ref[0]"] {
				t.Fatalf("show result: %v", show)
			}
		})
	}
	c.t = t
	// The blake3 hash gives other references for the same run.
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "const").stdout)
	m := runLines(t, c.must(0, "pel", "run", "--program", prog, "--hash", "blake3").stdout)
	if m["output_ref[0]"] != asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("hello"))).String() {
		t.Fatalf("blake3 run: %v", m)
	}
}

// Each failing status gives its exit code, the status line, diagnostics on
// stdout and one line on stderr; the run is stored all the same. --quiet
// and --output-raw print nothing on stdout for a failed run: the default
// run checks them on the first case of each status, AMDUAT_LONG=1 on every
// case (internal/longtest).
func TestPELRunFailures(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	hello := c.putData([]byte("hello"))
	ab := c.putData([]byte("ab"))
	absent := untaggedRef([]byte("never stored"))
	concat := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	slice := strings.TrimSpace(c.must(0, "pel", "seed", "slice").stdout)

	unknownOp := c.write("unknown.json", []byte(`{"nodes":[{"id":1,"op":"acme.frobnicate","version":1,"inputs":[{"input":0}]}],"roots":[{"node":1,"output":0}]}`))
	oneErrorLine(t, c.must(exitUsage, "pel", "build", unknownOp), "pel build")
	br := c.must(0, "pel", "build", "--allow-invalid", unknownOp)
	oneErrorLine(t, br, "pel build")
	if !strings.Contains(br.stderr, "warning") || !strings.Contains(br.stderr, "unknown operation acme.frobnicate version 1") {
		t.Fatalf("build warning %q", br.stderr)
	}
	unknownProg := strings.TrimSpace(br.stdout)
	paramsProg := strings.TrimSpace(c.must(0, "pel", "build", c.write("params.json",
		[]byte(`{"nodes":[{"id":1,"op":"pel.bytes.params","version":1}],"roots":[{"node":1,"output":0}]}`))).stdout)
	cfg := c.putData([]byte("cfg"), "0x42")
	otherScheme := untaggedRef([]byte("another scheme"))

	tests := []struct {
		name      string
		args      []string
		code      int
		status    string
		diagCodes []uint32
		failure   *report.StoreFailure
	}{
		{"missing input", []string{"--program", concat, "--input", hello, "--input", absent}, exitPELInvalidInputs,
			"INVALID_INPUTS status_code 0x00000003", []uint32{surf.DiagStoreInput},
			&report.StoreFailure{Phase: "input", InputIndex: 1, Ref: asl.MustParseReference(absent), Error: "ERR_NOT_FOUND"}},
		{"input index out of range", []string{"--program", concat, "--input", hello}, exitPELInvalidInputs,
			"INVALID_INPUTS status_code 0x00000003", []uint32{pel.DiagMissingInput}, nil},
		{"missing program", []string{"--program", absent}, exitPELInvalidProgram,
			"INVALID_PROGRAM status_code 0x00000002", []uint32{surf.DiagStoreProgram},
			&report.StoreFailure{Phase: "program", Ref: asl.MustParseReference(absent), Error: "ERR_NOT_FOUND"}},
		{"unknown op", []string{"--program", unknownProg, "--input", hello}, exitPELInvalidProgram,
			"INVALID_PROGRAM status_code 0x00000002", []uint32{pel.DiagUnknownOperation}, nil},
		{"not a program", []string{"--program", hello}, exitPELInvalidProgram,
			"INVALID_PROGRAM status_code 0x00000002", []uint32{pel.DiagProgramTypeTag}, nil},
		{"slice out of range", []string{"--program", slice, "--input", ab}, exitPELRuntimeFailed,
			"RUNTIME_FAILED status_code 0x00030001", []uint32{pel.DiagNodeFailed, 0x00030001}, nil},
		{"params missing", []string{"--program", paramsProg}, exitPELInvalidInputs,
			"INVALID_INPUTS status_code 0x00000003", []uint32{pel.DiagMissingGlobal}, nil},
		{"params not stored", []string{"--program", paramsProg, "--params", absent}, exitPELInvalidInputs,
			"INVALID_INPUTS status_code 0x00000003", []uint32{surf.DiagStoreParams},
			&report.StoreFailure{Phase: "params", Ref: asl.MustParseReference(absent), Error: "ERR_NOT_FOUND"}},
		{"scheme unsupported", []string{"--program", concat, "--scheme", otherScheme}, exitPELSchemeUnsupported,
			"SCHEME_UNSUPPORTED status_code 0x00000001", []uint32{surf.DiagSchemeUnsupported}, nil},
	}
	modesChecked := map[string]bool{} // statuses whose --quiet and --output-raw were checked
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			args := append([]string{"pel", "run"}, tt.args...)
			r := c.must(tt.code, args...)
			oneErrorLine(t, r, "pel run")
			m := runLines(t, r.stdout)
			if m["status"] != tt.status || m["output_ref[0]"] != "" {
				t.Fatalf("stdout %q, want status %s and no outputs", r.stdout, tt.status)
			}
			if !strings.Contains(r.stderr, "program status "+strings.Fields(tt.status)[0]) || !strings.HasSuffix(r.stderr, "; result_ref "+m["result_ref"]+"\n") {
				t.Fatalf("stderr %q", r.stderr)
			}
			for i, code := range tt.diagCodes {
				if !strings.HasPrefix(m[fmt.Sprintf("diagnostic[%d]", i)], fmt.Sprintf("code 0x%08x ", code)) {
					t.Fatalf("diagnostic %d: %q, want code 0x%08x", i, m[fmt.Sprintf("diagnostic[%d]", i)], code)
				}
			}
			if _, extra := m[fmt.Sprintf("diagnostic[%d]", len(tt.diagCodes))]; extra {
				t.Fatalf("more diagnostics than %d: %q", len(tt.diagCodes), r.stdout)
			}
			if (tt.failure != nil) != (m["store_failure"] != "") {
				t.Fatalf("store_failure line %q, want %v", m["store_failure"], tt.failure)
			}

			var j report.Run
			rj := c.must(tt.code, append([]string{"--json"}, args...)...)
			oneJSON(t, rj.stdout, &j)
			if j.Status+" status_code "+fmt.Sprintf("0x%08x", j.StatusCode) != tt.status || j.ResultRef.String() != m["result_ref"] ||
				j.TraceRef.String() != m["trace_ref"] || len(j.OutputRefs) != 0 || len(j.Diagnostics) != len(tt.diagCodes) {
				t.Fatalf("--json %+v, text %v", j, m)
			}
			for i, d := range j.Diagnostics {
				if d.Code != tt.diagCodes[i] || d.Message == "" || !strings.HasSuffix(m[fmt.Sprintf("diagnostic[%d]", i)], " "+d.Message) {
					t.Fatalf("--json diagnostic %d: %+v, text %q", i, d, m[fmt.Sprintf("diagnostic[%d]", i)])
				}
			}
			if (j.StoreFailure == nil) != (tt.failure == nil) || tt.failure != nil && *j.StoreFailure != *tt.failure {
				t.Fatalf("--json store_failure %+v, want %+v", j.StoreFailure, tt.failure)
			}
			// --quiet and --output-raw print nothing on stdout for a failed run.
			modes := []string{"--quiet", "--output-raw"}
			if !longtest.Enabled() && modesChecked[tt.status] {
				modes = nil
			}
			modesChecked[tt.status] = true
			for _, mode := range modes {
				rq := c.must(tt.code, append(args, mode)...)
				oneErrorLine(t, rq, "pel run")
				if rq.stdout != "" {
					t.Fatalf("%s printed %q", mode, rq.stdout)
				}
			}
			// The stored result and trace say the same.
			show := runLines(t, c.must(0, "pel", "show", m["result_ref"]).stdout)
			if show["trace_ref"] != m["trace_ref"] || !strings.HasPrefix(show["status"], tt.status+" kind ") {
				t.Fatalf("show result %v", show)
			}
		})
	}
	c.t = t

	// The global params artifact passes through pel.bytes.params with its tag.
	r := c.must(0, "pel", "run", "--program", paramsProg, "--params", cfg)
	m := runLines(t, r.stdout)
	if m["output_ref[0]"] != cfg {
		t.Fatalf("params run output %s, want the params artifact %s", m["output_ref[0]"], cfg)
	}
}

// A damaged input (bytes flipped on disk) is an ERR_INTEGRITY store failure.
func TestPELRunDamagedInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	data := demoBytes("pel damaged input", 2000)
	in := c.putData(data)
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "hash").stdout)
	if n := corrupt(t, c.store, data[500:564]); n != 1 {
		t.Fatalf("input found in %d values", n)
	}
	var j report.Run
	oneJSON(t, c.must(exitPELInvalidInputs, "--json", "pel", "run", "--program", prog, "--input", in).stdout, &j)
	want := report.StoreFailure{Phase: "input", InputIndex: 0, Ref: asl.MustParseReference(in), Error: "ERR_INTEGRITY"}
	if j.Status != "INVALID_INPUTS" || j.StoreFailure == nil || *j.StoreFailure != want {
		t.Fatalf("run on a damaged input: %+v", j)
	}
}

func TestPELRunUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	sha0 := "0001" + strings.Repeat("00", 32)
	oneErrorLine(t, c.must(exitStore, "pel", "run", "--program", sha0), "pel run")
	c.initStore()
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "const").stdout)
	for _, args := range [][]string{
		{"pel", "run"},
		{"pel", "run", "--program", "zz"},
		{"pel", "run", "--program", prog, "--input", "0001AB"},
		{"pel", "run", "--program", prog, "--params", "1"},
		{"pel", "run", "--program", prog, "--scheme", "x"},
		{"pel", "run", "--program", prog, "extra"},
		{"pel", "run", "--program", prog, "--output-raw", "--quiet"},
		{"pel", "run", "--program", prog, "--hash", "md5"},
		{"--json", "pel", "run", "--program", prog, "--output-raw"},
		{"--json", "pel", "run", "--program", prog, "--quiet"},
	} {
		r := c.must(exitUsage, args...)
		oneErrorLine(t, r, "pel run")
	}
	// --output-raw with two outputs: usage error after the run.
	two := c.write("two.json", []byte(`{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"x"}}],"roots":[{"node":1},{"node":1}]}`))
	twoProg := strings.TrimSpace(c.must(0, "pel", "build", two).stdout)
	r := c.must(exitUsage, "pel", "run", "--program", twoProg, "--output-raw")
	oneErrorLine(t, r, "pel run")
	if r.stdout != "" || !strings.Contains(r.stderr, "exactly one output, this one has 2") {
		t.Fatalf("--output-raw with 2 outputs: %q %q", r.stdout, r.stderr)
	}
	m := runLines(t, c.must(0, "pel", "run", "--program", twoProg).stdout)
	if m["output_ref[0]"] != untaggedRef([]byte("x")) || m["output_ref[1]"] != m["output_ref[0]"] {
		t.Fatalf("two outputs: %v", m)
	}
	help := c.must(0, "pel", "run", "--help").stdout
	for _, want := range []string{"11   SCHEME_UNSUPPORTED", "12   INVALID_PROGRAM", "13   INVALID_INPUTS", "14   RUNTIME_FAILED", "--output-raw", "result_ref REF"} {
		if !strings.Contains(help, want) {
			t.Errorf("pel run --help lacks %q", want)
		}
	}
}

func TestPELBuild(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	src := []byte("{\"nodes\":[\n  {\"id\":2,\"op\":\"pel.bytes.concat\",\"version\":1,\"inputs\":[{\"node\":1},{\"input\":0}]},\n  {\"id\":1,\"op\":\"pel.bytes.const\",\"version\":1,\"params\":{\"text\":\"hi \"}}\n],\"roots\":[{\"node\":2,\"output\":0}]}\n")
	file := c.write("prog.json", src)
	p, err := pel.ProgramFromJSON(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	art, _ := pel.ProgramArtifact(p)
	want := asl.MustDerive(asl.HashSHA256, art).String()
	if got := strings.TrimSpace(c.must(0, "pel", "build", file).stdout); got != want {
		t.Fatalf("build = %s, want %s", got, want)
	}
	if r := c.runIn(bytes.NewReader(src), "pel", "build", "-"); r.code != 0 || strings.TrimSpace(r.stdout) != want || r.stderr != "" {
		t.Fatalf("build - : %d %q %q", r.code, r.stdout, r.stderr)
	}
	var br report.Build
	oneJSON(t, c.must(0, "--json", "pel", "build", file).stdout, &br)
	if br.Ref.String() != want || br.Nodes != 2 || br.Roots != 1 || !br.Valid || br.Problem != "" || br.TypeTag != 0x101 || br.Size != uint64(len(art.Bytes)) {
		t.Fatalf("build --json %+v", br)
	}
	// show --json prints the JSON program format, which builds to the same reference.
	shown := c.must(0, "--json", "pel", "show", want).stdout
	again := c.write("again.json", []byte(shown))
	if got := strings.TrimSpace(c.must(0, "pel", "build", again).stdout); got != want {
		t.Fatalf("build of show --json = %s, want %s", got, want)
	}
	in := c.putData([]byte("there"))
	if got := c.must(0, "pel", "run", "--program", want, "--input", in, "--output-raw").stdout; got != "hi there" {
		t.Fatalf("run = %q", got)
	}

	for _, tt := range []struct {
		name, text, want string
	}{
		{"syntax", "{\"nodes\":[\n  {\"id\":1,}\n]}", "bad.json:2:11 (byte offset 22): json program: invalid character '}'"},
		{"type", "{\"nodes\":[{\"id\":\"one\"}]}", "bad.json:1:21 (byte offset 21): json program: member \"nodes.id\": want an integer in [0, 4294967295], got a string"},
		{"truncated", "{\"nodes\":[", "unexpected EOF"},
		{"unknown member", `{"nodes":[],"roots":[],"extra":1}`, `bad.json:1:24 (byte offset 24): json program: unknown member "extra"`},
		{"params type", `{"nodes":[{"id":1,"op":"pel.bytes.slice","version":1,"params":{"offset":-1,"length":1}}]}`, `bad.json:1:64 (byte offset 64): json program: node 1: pel.bytes.slice params: member "offset": want a non-negative integer, got a number`},
		{"missing op", `{"nodes":[{"id":1,"version":1}],"roots":[]}`, `"id", "op" and "version" are required`},
		{"duplicate id", `{"nodes":[{"id":1,"op":"pel.bytes.hash.asl1","version":1},{"id":1,"op":"pel.bytes.hash.asl1","version":1}],"roots":[]}`, "bad.json:1:60 (byte offset 60): json program: duplicate node id 1"},
		{"bad params", `{"nodes":[{"id":1,"op":"pel.bytes.slice","version":1,"params":{"offset":1}}],"roots":[]}`, `"offset" and "length" are both required`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			r := c.must(exitUsage, "pel", "build", c.write("bad.json", []byte(tt.text)))
			oneErrorLine(t, r, "pel build")
			if strings.Contains(r.stderr, "Go ") || strings.Contains(r.stderr, "JSON struct") || strings.Contains(r.stderr, "uint") {
				t.Fatalf("stderr %q names Go types", r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("stderr %q lacks %q", r.stderr, tt.want)
			}
		})
	}
	c.t = t
	oneErrorLine(t, c.must(exitIO, "pel", "build", filepath.Join(c.cwd, "missing.json")), "pel build")
	oneErrorLine(t, c.must(exitUsage, "pel", "build", c.cwd), "pel build")
	oneErrorLine(t, c.must(exitUsage, "pel", "build"), "pel build")
}

// pelGolden compares got with testdata/pel/name, or rewrites the file under
// -update.
func pelGolden(t *testing.T, name string, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "pel", name), []byte(got))
}

// pel show of programs, results, traces and the scheme descriptor, in
// text, --json and --dot, against golden files. Every reference involved
// is deterministic, so the files are stable. --json --dot wraps the --dot
// text, one rule for every artifact: the default run checks it on a
// program, a result and a trace, AMDUAT_LONG=1 on every case
// (internal/longtest).
func TestPELShowGolden(t *testing.T) {
	t.Parallel()
	jsonDotSample := map[string]bool{"program-diamond": true, "result-runtime-failed": true, "trace-ok": true}
	c := newCLI(t)
	c.initStore()
	constHash := strings.TrimSpace(c.must(0, "pel", "seed", "const-hash").stdout)
	concat := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	slice := strings.TrimSpace(c.must(0, "pel", "seed", "slice").stdout)
	hello := c.putData([]byte("hello "))
	ab := c.putData([]byte("ab"))
	absent := untaggedRef([]byte("never stored"))
	desc := c.putData(pel.SchemeDescriptor().Bytes, "0x100")
	if desc != pel.SchemeRefDAG1.String() {
		t.Fatalf("descriptor stored as %s, want SchemeRef_DAG_1 %s", desc, pel.SchemeRefDAG1)
	}
	diamond := strings.TrimSpace(c.must(0, "pel", "build", c.write("diamond.json", []byte(`{"nodes":[
  {"id":4,"op":"pel.bytes.concat","version":1,"inputs":[{"node":2},{"node":3},{"input":1}]},
  {"id":3,"op":"pel.bytes.slice","version":1,"inputs":[{"node":1}],"params":{"offset":0,"length":2}},
  {"id":2,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"node":1}]},
  {"id":1,"op":"pel.bytes.concat","version":1,"inputs":[{"input":0},{"input":0}]}
],"roots":[{"node":4,"output":0},{"node":3,"output":0}]}`))).stdout)
	broken := strings.TrimSpace(c.must(0, "pel", "build", "--allow-invalid", c.write("broken.json", []byte(`{"nodes":[
  {"id":1,"op":"acme.\"quoted\"\\op","version":3,"inputs":[{"node":7,"output":1}],"params":{"raw":"00ff"}}
],"roots":[{"node":9,"output":0}]}`))).stdout)

	runRefs := func(args ...string) (string, string) {
		r := c.run(append([]string{"pel", "run"}, args...)...)
		m := runLines(t, r.stdout)
		return m["result_ref"], m["trace_ref"]
	}
	okRes, okTrace := runRefs("--program", constHash)
	failRes, failTrace := runRefs("--program", slice, "--input", ab)
	missRes, _ := runRefs("--program", concat, "--input", hello, "--input", absent)
	diaRes, _ := runRefs("--program", diamond, "--input", ab, "--input", hello)
	inRes, inTrace := runRefs("--program", diamond, "--input", ab)

	for _, tt := range []struct {
		name string
		ref  string
		dot  bool
	}{
		{"program-const-hash", constHash, true},
		{"program-diamond", diamond, true},
		{"program-broken", broken, true},
		{"result-ok", okRes, true},
		{"trace-ok", okTrace, true},
		{"result-runtime-failed", failRes, true},
		{"trace-runtime-failed", failTrace, true},
		{"result-missing-input", missRes, true},
		{"result-diamond", diaRes, true},
		{"result-input-out-of-range", inRes, true},
		{"trace-input-out-of-range", inTrace, true},
		{"descriptor", desc, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			pelGolden(t, tt.name+".txt", c.must(0, "pel", "show", tt.ref).stdout)
			js := c.must(0, "--json", "pel", "show", tt.ref).stdout
			pelGolden(t, tt.name+".json", js)
			if !strings.HasPrefix(tt.name, "program") {
				var doc map[string]any
				oneJSON(t, js, &doc)
				if doc["ref"] != tt.ref {
					t.Fatalf("--json ref %v", doc["ref"])
				}
			}
			if tt.dot {
				dot := c.must(0, "pel", "show", "--dot", tt.ref).stdout
				pelGolden(t, tt.name+".dot", dot)
				checkDOT(t, dot)
				if !longtest.Enabled() && !jsonDotSample[tt.name] {
					return
				}
				var dj struct {
					Ref string `json:"ref"`
					Dot string `json:"dot"`
				}
				oneJSON(t, c.must(0, "--json", "pel", "show", "--dot", tt.ref).stdout, &dj)
				if dj.Ref != tt.ref || dj.Dot != dot {
					t.Fatalf("--json --dot differs from --dot")
				}
			} else {
				oneErrorLine(t, c.must(exitUsage, "pel", "show", "--dot", tt.ref), "pel show")
			}
		})
	}
	c.t = t
	// A result whose program is not stored has no program to draw.
	r := c.must(exitNotFound, "pel", "show", "--dot", runLinesRef(t, c, "--program", absent))
	oneErrorLine(t, r, "pel show")
	oneErrorLine(t, c.must(exitUsage, "pel", "show", hello), "pel show")
	oneErrorLine(t, c.must(exitNotFound, "pel", "show", absent), "pel show")
	oneErrorLine(t, c.must(exitUsage, "pel", "show", "xyz"), "pel show")
	junk := c.putData([]byte("not a program"), "0x101")
	r = c.must(exitUsage, "pel", "show", junk)
	if !strings.Contains(r.stderr, "program artifact does not decode") {
		t.Fatalf("show of a malformed program: %q", r.stderr)
	}
}

func runLinesRef(t *testing.T, c *cli, args ...string) string {
	t.Helper()
	return runLines(t, c.run(append([]string{"pel", "run"}, args...)...).stdout)["result_ref"]
}

// checkDOT checks the shape of a DOT document: one digraph, balanced
// braces outside quoted strings, every statement line ending in ";", and
// every edge endpoint declared as a node.
func checkDOT(t *testing.T, dot string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(dot, "\n"), "\n")
	if lines[0] != "digraph pel {" || lines[len(lines)-1] != "}" {
		t.Fatalf("DOT does not start with the digraph and end with }: %q", dot)
	}
	quoted := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	decl := regexp.MustCompile(`^  ([a-z]+\d+) \[`)
	edge := regexp.MustCompile(`^  ([a-z]+\d+) -> ([a-z]+\d+) \[`)
	declared := map[string]bool{}
	for _, l := range lines[1 : len(lines)-1] {
		bare := quoted.ReplaceAllString(l, "Q")
		if strings.ContainsAny(bare, `{}"\`) || !strings.HasSuffix(bare, "];") {
			t.Fatalf("DOT line %q is malformed", l)
		}
		if m := edge.FindStringSubmatch(l); m != nil {
			if !declared[m[1]] || !declared[m[2]] {
				t.Fatalf("DOT edge %q uses an undeclared node", l)
			}
		} else if m := decl.FindStringSubmatch(l); m != nil {
			declared[m[1]] = true
		}
	}
}

// The action cache, node memo, deterministic limits, the wall-time bound and
// replay verification, through the CLI.
func TestPELRunCacheMemoLimitsVerify(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	constHash := strings.TrimSpace(c.must(0, "pel", "seed", "const-hash").stdout)
	run := func(code int, args ...string) report.Run {
		t.Helper()
		var j report.Run
		oneJSON(t, c.must(code, append([]string{"--json", "pel", "run", "--program", constHash}, args...)...).stdout, &j)
		return j
	}
	first := run(0)
	second := run(0)
	if first.Cache != "miss" || second.Cache != "hit" || second.ResultRef != first.ResultRef || second.TraceRef != first.TraceRef {
		t.Fatalf("first %+v, second %+v: want a miss then a hit with the same refs", first, second)
	}
	if nc := run(0, "--no-cache"); nc.Cache != "off" || nc.ResultRef != first.ResultRef {
		t.Fatalf("--no-cache run %+v", nc)
	}
	// The node memo: a second program sharing node 1 (const "hello") reuses it.
	if m := run(0, "--no-cache", "--memo-nodes"); m.NodesReused != 0 || m.ResultRef != first.ResultRef {
		t.Fatalf("first memo run %+v", m)
	}
	constProg := strings.TrimSpace(c.must(0, "pel", "seed", "const").stdout)
	var mj report.Run
	oneJSON(t, c.must(0, "--json", "pel", "run", "--program", constProg, "--memo-nodes").stdout, &mj)
	if mj.NodesReused != 1 || mj.Status != "OK" {
		t.Fatalf("const run with the memo of const-hash: %+v, want 1 node reused", mj)
	}

	// Limits: recorded in the result, part of the request.
	lim := run(exitPELRuntimeFailed, "--max-nodes", "1")
	if lim.Status != "RUNTIME_FAILED" || lim.StatusCode != pel.StatusLimitNodes || lim.Diagnostics[0].Code != pel.DiagLimitNodes || lim.Cache != "miss" {
		t.Fatalf("--max-nodes 1: %+v", lim)
	}
	show := runLines(t, c.must(0, "pel", "show", lim.ResultRef.String()).stdout)
	if show["limits"] != "max_nodes 1 max_output_bytes 0" {
		t.Fatalf("show of a bounded result: limits %q", show["limits"])
	}
	if ok := run(0, "--max-nodes", "2", "--max-output-bytes", "37"); ok.Status != "OK" || ok.ResultRef == first.ResultRef {
		t.Fatalf("bounded OK run %+v: want OK with a result that records its bounds", ok)
	}
	if ob := run(exitPELRuntimeFailed, "--max-output-bytes", "36"); ob.StatusCode != pel.StatusLimitOutputBytes {
		t.Fatalf("--max-output-bytes 36: %+v", ob)
	}

	// A wall-time bound that has passed stores nothing.
	before := c.must(0, "verify").stdout
	r := c.must(exitIO, "pel", "run", "--program", constHash, "--no-cache", "--timeout", "1ns")
	oneErrorLine(t, r, "pel run")
	if !strings.Contains(r.stderr, "wall-time bound") || c.must(0, "verify").stdout != before {
		t.Fatalf("--timeout: stderr %q; store before %q after %q", r.stderr, before, c.must(0, "verify").stdout)
	}

	// Replay verification: OK, then a damaged output is the first mismatch.
	var vj report.Verification
	oneJSON(t, c.must(0, "--json", "pel", "verify", first.ResultRef.String()).stdout, &vj)
	if !vj.Verified || vj.Mismatch != nil || vj.TraceRef == nil || *vj.TraceRef != first.TraceRef {
		t.Fatalf("verify --json %+v", vj)
	}
	if out := c.must(0, "pel", "verify", first.ResultRef.String()).stdout; out != "result "+first.ResultRef.String()+"\ntrace_ref "+first.TraceRef.String()+
		"\nok: outputs, result and trace are byte-identical\n" {
		t.Fatalf("verify text %q", out)
	}
	if n := corrupt(t, c.store, sha([]byte("hello"))[4:28]); n != 1 {
		t.Fatalf("the output digest was found in %d values", n)
	}
	r = c.must(exitNegative, "pel", "verify", first.ResultRef.String())
	oneErrorLine(t, r, "pel verify")
	if !strings.Contains(r.stdout, "mismatch output[0] stored "+first.OutputRefs[0].String()) {
		t.Fatalf("verify of a damaged output: %q", r.stdout)
	}
	oneJSON(t, c.must(exitNegative, "--json", "pel", "verify", first.ResultRef.String()).stdout, &vj)
	if vj.Verified || vj.Mismatch == nil || vj.Mismatch.Artifact != "output[0]" {
		t.Fatalf("verify --json of a damaged output: %+v", vj)
	}
	oneErrorLine(t, c.must(exitNotFound, "pel", "verify", untaggedRef([]byte("no such result"))), "pel verify")
	oneErrorLine(t, c.must(exitUsage, "pel", "verify", constHash), "pel verify")
}

// TestPELRunHostileConcat: a 1 MB program (a 1 MiB const and one concat of
// 5,000 inputs reading it) declares 5.2 GB of output. --max-output-bytes
// stops it with RUNTIME_FAILED status code 5 before allocating. Without a
// limit the concat holds no copy of anything (a rope, SPECS.md §12.9), so
// --max-memory does not refuse it; the run then hashes and would store
// 5.2 GB, and a wall-time bound stops it part-way: exit 6, nothing stored
// (SPECS.md §12.6, §14.7, §16.2).
func TestPELRunHostileConcat(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: bytes.Repeat([]byte{1}, opreg.MaxConstBytes)})
	if err != nil {
		t.Fatal(err)
	}
	ins := make([]pel.DagInput, 5000)
	for i := range ins {
		ins[i] = pel.FromNode(1, 0)
	}
	art, err := pel.ProgramArtifact(pel.Program{Nodes: []pel.Node{
		{ID: 1, Op: opreg.OpConst, Params: cp},
		{ID: 2, Op: opreg.OpConcat, Inputs: ins, Params: []byte{}},
	}, Roots: []pel.RootRef{{NodeID: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	prog := c.putData(art.Bytes, "0x00000101")

	var j report.Run
	oneJSON(t, c.must(exitPELRuntimeFailed, "--json", "pel", "run", "--program", prog, "--max-output-bytes", "2097152").stdout, &j)
	if j.StatusCode != pel.StatusLimitOutputBytes || j.Diagnostics[0].Code != pel.DiagLimitOutputBytes {
		t.Fatalf("--max-output-bytes: %+v", j)
	}

	before := c.must(0, "verify").stdout
	r := c.must(exitIO, "pel", "run", "--program", prog, "--no-cache", "--max-memory", "67108864", "--timeout", "1s")
	oneErrorLine(t, r, "pel run")
	if !strings.Contains(r.stderr, "--timeout 1s exceeded") || c.must(0, "verify").stdout != before {
		t.Fatalf("--timeout: stderr %q; store before %q after %q", r.stderr, before, c.must(0, "verify").stdout)
	}

	// The work budget (SPECS.md §12.8) stops it before the concat: 5,000
	// MiB of outputs declared, above 64M; nothing stored, exit 8.
	r = c.must(exitInternal, "pel", "run", "--program", prog, "--no-cache", "--max-work", "64M")
	oneErrorLine(t, r, "pel run")
	if !strings.Contains(r.stderr, "work budget exceeded: outputs would total 5243928576 bytes, above the work budget of 67108864") || c.must(0, "verify").stdout != before {
		t.Fatalf("--max-work: stderr %q; store before %q after %q", r.stderr, before, c.must(0, "verify").stdout)
	}
	c.must(exitUsage, "pel", "run", "--program", prog, "--max-work", "1Q")
}

// TestPELRunJobs: --jobs changes no stored byte (SPECS.md §12.10): 8 hash
// nodes over 64 KiB inputs (read into memory) and just over 1 MiB (read
// from the store as the hashes run, §14.11) give the same result, trace and
// outputs sequentially and with 4 goroutines; a negative --jobs is a usage
// error.
func TestPELRunJobs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	const n = 8
	nodes := make([]pel.Node, n+1)
	digests := make([]pel.DagInput, n)
	args := []string{"--json", "pel", "run", "--no-cache"}
	for i := range n {
		nodes[i] = pel.Node{ID: pel.NodeID(i + 1), Op: opreg.OpHash, Inputs: []pel.DagInput{pel.External(uint32(i))}, Params: []byte{}}
		digests[i] = pel.FromNode(pel.NodeID(i+1), 0)
		size := 64 << 10
		if i%2 == 1 {
			size = 1<<20 + 1
		}
		args = append(args, "--input", c.putData(bytes.Repeat([]byte{byte(i)}, size)))
	}
	nodes[n] = pel.Node{ID: n + 1, Op: opreg.OpConcat, Inputs: digests, Params: []byte{}}
	art, err := pel.ProgramArtifact(pel.Program{Nodes: nodes, Roots: []pel.RootRef{{NodeID: n + 1}}})
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--program", c.putData(art.Bytes, "0x00000101"))
	var seq, par report.Run
	oneJSON(t, c.must(0, append(args, "--jobs", "1")...).stdout, &seq)
	oneJSON(t, c.must(0, append(args, "--jobs", "4")...).stdout, &par)
	if seq.ResultRef != par.ResultRef || seq.TraceRef != par.TraceRef || fmt.Sprint(seq.OutputRefs) != fmt.Sprint(par.OutputRefs) {
		t.Fatalf("--jobs 1 %+v\n--jobs 4 %+v", seq, par)
	}
	oneErrorLine(t, c.must(exitUsage, append(args, "--jobs", "-1")...), "pel run")
}
