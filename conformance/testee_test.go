package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/amduat/amduat/conformance"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/internal/testexit"
	"github.com/amduat/amduat/vectors"
)

// testeeEnv makes the test binary the Go testee: TestMain serves the
// protocol on stdin/stdout instead of running tests.
const testeeEnv = "AMDUAT_CONFORMANCE_TESTEE"

func TestMain(m *testing.M) {
	switch os.Getenv(testeeEnv) {
	case "go":
		if err := conformance.ServeTestee(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "testee:", err)
			testexit.Exit(1)
		}
		testexit.Exit(0)
	case "crash-on-derive":
		// A testee that exits in the middle of a BLAKE3 reference_derive request:
		// the runner must fail that case, restart it, and go on.
		testexit.Exit(serveCrashing())
	}
	testexit.Main(m)
}

func serveCrashing() int {
	for {
		payload, err := conformance.ReadFrame(os.Stdin)
		if err != nil {
			return 0
		}
		var req conformance.TesteeRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return 1
		}
		if req.Kind == conformance.KindReferenceDerive {
			var in struct {
				HashID int `json:"hash_id"`
			}
			if json.Unmarshal(req.Input, &in) == nil && in.HashID == 0x8001 {
				return 3
			}
		}
		var out any
		if req.Kind == conformance.KindHello {
			h := conformance.GoHello()
			h.Implementation = "crashing"
			out = h
		} else {
			out, err = conformance.Solve(context.Background(), req.Kind, req.Input)
		}
		resp := conformance.TesteeResponse{ID: req.ID}
		if err != nil {
			resp.Error = err.Error()
		} else {
			resp.Output, _ = conformance.MarshalJSON(out)
		}
		b, _ := conformance.MarshalJSON(resp)
		if conformance.WriteFrame(os.Stdout, b) != nil {
			return 1
		}
	}
}

func selfTestee(t testing.TB, mode string) ([]string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"/usr/bin/env", testeeEnv + "=" + mode, exe}, ""
}

// bigVector is the size of input and expectation (JSON bytes) from which a
// vector is left out of the testee tests' default run: only
// pel.exec.ok.const-1mib and pel.exec.invalid-program.params-const-1mib-plus-1
// reach it (2 MiB each; the next largest is 23 KiB). Through a race-built
// testee those two cost 3 CPU-seconds, more than the other 900 vectors
// together. TestVectors runs them in every run.
const bigVector = 64 << 10

// testeeVectors returns the vector files the testee tests drive: under
// AMDUAT_LONG=1 (internal/longtest) the embedded files as they are; else
// the same files without the vectors of bigVector bytes or more.
func testeeVectors(t *testing.T) fs.FS {
	t.Helper()
	if longtest.Enabled() {
		return vectors.FS()
	}
	fsys, err := smallVectors()
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

var smallVectors = sync.OnceValues(func() (fs.FS, error) {
	files, err := conformance.FrozenVectors()
	if err != nil {
		return nil, err
	}
	out := fstest.MapFS{}
	for _, f := range files {
		small := f.File
		small.Vectors = nil
		for _, v := range f.Vectors {
			if len(v.Input)+len(v.Expect) < bigVector {
				small.Vectors = append(small.Vectors, v)
			}
		}
		data, err := json.Marshal(small)
		if err != nil {
			return nil, err
		}
		out[f.Name] = &fstest.MapFile{Data: data}
	}
	return out, nil
})

// TestTesteeGoVectors: every embedded vector and 300 generated cases
// (3,000 with AMDUAT_LONG=1; .ci/run drives 20,000 through the command)
// pass against the Go testee over the pipe, with no expected failures, and
// no category is skipped. The default run leaves out the two vectors of
// bigVector bytes or more (testeeVectors); AMDUAT_LONG=1 drives them too.
func TestTesteeGoVectors(t *testing.T) {
	t.Parallel()
	cmd, _ := selfTestee(t, "go")
	generate := longtest.Logf(t, "generated cases", 300, 3000)
	var fails []string
	rep, err := conformance.Test(context.Background(), conformance.TestOptions{
		Command: cmd, Vectors: testeeVectors(t), Generate: generate, Seed: 1, FailDir: t.TempDir(), Stderr: os.Stderr,
		Report: func(r conformance.CaseResult) {
			if r.Outcome != conformance.OutcomePass && len(fails) < 20 {
				fails = append(fails, r.ID+": "+r.Outcome+": "+r.Reason)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fails {
		t.Error(f)
	}
	if !rep.OK() || rep.Total.Skipped != 0 || rep.Total.Passed != rep.Cases {
		t.Fatalf("total %s over %d cases", rep.Total, rep.Cases)
	}
	if rep.Implementation != "amduat-go" || rep.Restarts != 0 {
		t.Errorf("implementation %q restarts %d", rep.Implementation, rep.Restarts)
	}
	// Every category of the vectors is reported, and the generated cases
	// reach every generated kind.
	if len(rep.Categories) < 17 {
		t.Errorf("%d categories reported: %+v", len(rep.Categories), rep.Categories)
	}
}

// TestGeneratorDeterministic: the same seed gives the same cases, ids
// included; another seed differs.
func TestGeneratorDeterministic(t *testing.T) {
	dump := func(seed uint64) string {
		g := conformance.NewCaseGenerator(seed)
		var b strings.Builder
		for range 300 {
			c, err := g.Next()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %s %s %s\n", c.ID, c.Kind, c.Input, c.Expect)
		}
		return b.String()
	}
	a, b := dump(7), dump(7)
	if a != b {
		t.Fatal("seed 7 gave two different sequences")
	}
	if a == dump(8) {
		t.Fatal("seeds 7 and 8 gave the same sequence")
	}
	// Both accepting and rejecting answers appear for decoders.
	if !strings.Contains(a, `"reject"`) || !strings.Contains(a, `"artifact_bytes"`) {
		t.Error("generated cases lack rejections or acceptances")
	}
}

// TestTesteeSkipsAndExpectedFailures: categories filter, undeclared kinds
// are skipped (never passed), a listed failure that passes is an
// unexpected pass, and a failing case is written as a vector file that
// `conformance run` accepts and that fails again against the testee.
// The runner is given the asl files and tgk.edge.json (a category to
// filter out), not all of them: the runner loads every file given, and
// the others are 5 MiB. Every failure file is checked by `conformance
// run`; the default run gives two of them to the testee again (each
// failure costs a restart of the race-built testee, 0.15 CPU-s), and
// AMDUAT_LONG=1 (internal/longtest) all of them.
func TestTesteeSkipsAndExpectedFailures(t *testing.T) {
	t.Parallel()
	cmd, _ := selfTestee(t, "crash-on-derive")
	given := fstest.MapFS{}
	names, err := fs.Glob(vectors.FS(), "*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "asl.") || n == "tgk.edge.json" {
			data, err := fs.ReadFile(vectors.FS(), n)
			if err != nil {
				t.Fatal(err)
			}
			given[n] = &fstest.MapFile{Data: data}
		}
	}
	if len(given) < 3 {
		t.Fatalf("only %d files given to the runner", len(given))
	}
	dir := t.TempDir()
	rep, err := conformance.Test(context.Background(), conformance.TestOptions{
		Command: cmd, Vectors: given, Categories: []string{"asl"}, FailDir: dir,
		// An exact id must fail; a pattern's cases may fail (§21.5).
		ExpectedFailures: []string{"asl.derive.blake3.untagged-empty", "asl.artifact.encode.untagged-empty", "asl.reference.*"},
	})
	if err != nil {
		t.Fatal(err)
	}
	byCat := map[string]conformance.CategoryCount{}
	for _, c := range rep.Categories {
		byCat[c.Category] = c
		if !strings.HasPrefix(c.Category, "asl.") {
			t.Errorf("category %s reported although only asl was selected", c.Category)
		}
	}
	d := byCat["asl.derive"]
	if d.Passed != 11 || d.Failed != 10 || d.ExpectedFailures != 1 || d.UnexpectedPasses != 0 {
		t.Errorf("asl.derive: %s", d)
	}
	if a := byCat["asl.artifact"]; a.UnexpectedPasses != 1 || a.Failed != 0 {
		t.Errorf("asl.artifact: %s", a)
	}
	if r := byCat["asl.reference"]; r.UnexpectedPasses != 0 || r.Passed == 0 || r.Failed != 0 {
		t.Errorf("asl.reference (matched by a pattern, all passing): %s", r)
	}
	if rep.OK() || rep.Restarts != d.Failed+d.ExpectedFailures {
		t.Errorf("report OK %t restarts %d, want not OK and one restart per derive case", rep.OK(), rep.Restarts)
	}
	if len(rep.FailureFiles) != d.Failed {
		t.Fatalf("%d failure files, want %d", len(rep.FailureFiles), d.Failed)
	}
	// The failure files are standalone vectors: the Go implementation
	// passes them, the crashing testee fails them again.
	sum, err := conformance.RunDir(context.Background(), dir, nil)
	if err != nil || sum.Failed != 0 || sum.Passed != d.Failed {
		t.Fatalf("conformance run over the failure files: %v %v", sum, err)
	}
	rerun := fstest.MapFS{}
	for _, p := range rep.FailureFiles[:min(len(rep.FailureFiles), longtest.Count(2, len(rep.FailureFiles)))] {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rerun[filepath.Base(p)] = &fstest.MapFile{Data: data}
	}
	again, err := conformance.Test(context.Background(), conformance.TestOptions{Command: cmd, Vectors: rerun})
	if err != nil || again.Total.Failed != len(rerun) {
		t.Fatalf("rerun of %d failure files: %s, %v", len(rerun), again.Total, err)
	}
}

// TestParseExpectedFailures: comments, blank lines and bad patterns.
func TestParseExpectedFailures(t *testing.T) {
	got, err := conformance.ParseExpectedFailures([]byte("# header\n\nasl.derive.blake3.* # no BLAKE3\n  bundle.encode.blake3\n"))
	if err != nil || strings.Join(got, "|") != "asl.derive.blake3.*|bundle.encode.blake3" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := conformance.ParseExpectedFailures([]byte("a[\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad pattern: %v", err)
	}
}

// TestTesteeProtocolErrors: a testee that is not there, or answers the
// hello with something else, is an ErrTestee, not a pass.
func TestTesteeProtocolErrors(t *testing.T) {
	for name, cmd := range map[string][]string{
		"missing": {filepath.Join(t.TempDir(), "no-such-testee")},
		"silent":  {"/bin/sh", "-c", "exit 0"},
		"garbage": {"/bin/sh", "-c", "printf '\\000\\000\\000\\002{}'; cat >/dev/null"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := conformance.Test(context.Background(), conformance.TestOptions{Command: cmd, Vectors: vectors.FS(), Timeout: time.Minute})
			if !errors.Is(err, conformance.ErrTestee) {
				t.Fatalf("err = %v, want ErrTestee", err)
			}
		})
	}
}

// TestFrameLimits: frames of length 0 or past MaxFrame are refused before
// allocation; a stream cut inside a frame is an error, at a frame boundary
// io.EOF.
func TestFrameLimits(t *testing.T) {
	for _, in := range [][]byte{{0, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff}, {0x04, 0, 0, 1}} {
		if _, err := conformance.ReadFrame(bytes.NewReader(in)); !errors.Is(err, conformance.ErrFrame) {
			t.Errorf("%x: %v, want ErrFrame", in, err)
		}
	}
	if _, err := conformance.ReadFrame(bytes.NewReader([]byte{0, 0, 0, 2, '{'})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut payload: %v", err)
	}
	if _, err := conformance.ReadFrame(bytes.NewReader(nil)); err != io.EOF {
		t.Errorf("empty stream: %v", err)
	}
	var buf bytes.Buffer
	if err := conformance.WriteFrame(&buf, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := conformance.ReadFrame(&buf); err != nil || string(got) != `{"a":1}` {
		t.Errorf("round trip %q %v", got, err)
	}
}

// TestCanonicalJSON: absent and null members are equal, member order and
// string escapes do not matter, [] is not absent.
func TestCanonicalJSON(t *testing.T) {
	for _, c := range []struct {
		a, b string
		eq   bool
	}{
		{`{"a":1,"b":null}`, `{"a":1}`, true},
		{`{"b":[1,2],"a":"\u0041<"}`, `{"a":"A\u003c","b":[1,2]}`, true},
		{`{"a":[]}`, `{}`, false},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":{"x":null}}`, `{"a":{}}`, true},
	} {
		a, err := conformance.CanonicalJSON([]byte(c.a))
		if err != nil {
			t.Fatal(err)
		}
		b, err := conformance.CanonicalJSON([]byte(c.b))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(a, b) != c.eq {
			t.Errorf("%s vs %s: equal %t, want %t", c.a, c.b, !c.eq, c.eq)
		}
	}
}

// TestTesteePython runs the runner against the Python testee
// (conformance/testee-python) with its expected-failures file: every
// embedded vector and 700 generated cases (2,000 with AMDUAT_LONG=1;
// .ci/run drives 5,000 through the command). The default run leaves out
// the two vectors of bigVector bytes or more (testeeVectors);
// AMDUAT_LONG=1 drives them too.
func TestTesteePython(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the Python testee is not run")
	}
	list, err := os.ReadFile(filepath.Join("testee-python", "expected-failures.txt"))
	if err != nil {
		t.Fatal(err)
	}
	xf, err := conformance.ParseExpectedFailures(list)
	if err != nil {
		t.Fatal(err)
	}
	generate := longtest.Logf(t, "generated cases", 700, 2000)
	var fails []string
	rep, err := conformance.Test(context.Background(), conformance.TestOptions{
		Command: []string{py, filepath.Join("testee-python", "testee.py")}, Vectors: testeeVectors(t),
		ExpectedFailures: xf, Generate: generate, Seed: 3, Stderr: os.Stderr,
		Report: func(r conformance.CaseResult) {
			if (r.Outcome == conformance.OutcomeFail || r.Outcome == conformance.OutcomeUnexpectedPass) && len(fails) < 20 {
				fails = append(fails, r.ID+": "+r.Outcome+": "+r.Reason)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fails {
		t.Error(f)
	}
	if !rep.OK() || rep.Total.Passed < 500 {
		t.Fatalf("python testee: %s", rep.Total)
	}
	for _, c := range rep.Categories {
		t.Logf("%-16s %s", c.Category, c)
	}
}

// BenchmarkTesteeGo100k drives 100,000 generated cases through the Go
// testee over a pipe and reports cases per second (b.N is ignored beyond
// the first iteration's size: run with -benchtime=1x).
func BenchmarkTesteeGo100k(b *testing.B) {
	cmd, _ := selfTestee(b, "go")
	for range b.N {
		start := time.Now()
		rep, err := conformance.Test(context.Background(), conformance.TestOptions{Command: cmd, Generate: 100000, Seed: 42})
		if err != nil {
			b.Fatal(err)
		}
		if !rep.OK() || rep.Total.Passed != 100000 {
			b.Fatalf("%s", rep.Total)
		}
		b.ReportMetric(float64(rep.Cases)/time.Since(start).Seconds(), "cases/s")
	}
}
