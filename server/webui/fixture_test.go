package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// Programs of the fixture, in the JSON program format (SPECS.md §15).
const (
	// greetJSON runs OK: "Dear " ++ input 0, and its SHA-256; two roots.
	greetJSON = `{"nodes":[
  {"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"Dear "}},
  {"id":2,"op":"pel.bytes.concat","version":1,"inputs":[{"node":1},{"input":0}]},
  {"id":3,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"node":2}]}
],"roots":[{"node":2},{"node":3}]}`
	// brokenJSON fails at runtime: node 3 slices past the end, so node 4
	// is never evaluated.
	brokenJSON = `{"nodes":[
  {"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"hello, "}},
  {"id":2,"op":"pel.bytes.concat","version":1,"inputs":[{"node":1},{"input":0}]},
  {"id":3,"op":"pel.bytes.slice","version":1,"inputs":[{"node":2}],"params":{"offset":100,"length":3}},
  {"id":4,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"node":3}]}
],"roots":[{"node":4}]}`
)

// fixture is a store with real surface runs in it.
type fixture struct {
	s asl.Store
	// Inputs.
	a, b asl.Reference
	// Programs.
	concat, greet, broken asl.Reference
	// Runs: concat OK, concat missing its second input (INVALID_INPUTS),
	// greet OK, broken RUNTIME_FAILED.
	concatOK, concatBad, greetOK, brokenRun *surf.Run
}

func put(t testing.TB, s asl.Store, a asl.Artifact) asl.Reference {
	t.Helper()
	ref, err := asl.PutArtifact(context.Background(), s, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func putProgramJSON(t testing.TB, s asl.Store, j string) asl.Reference {
	t.Helper()
	p, err := pel.ProgramFromJSON([]byte(j), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := pel.ProgramArtifact(p)
	if err != nil {
		t.Fatal(err)
	}
	return put(t, s, a)
}

func run(t testing.TB, s asl.Store, req surf.Request) *surf.Run {
	t.Helper()
	r, err := surf.New(s, surf.Options{}).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newFixture(t testing.TB, s asl.Store) *fixture {
	t.Helper()
	f := &fixture{s: s}
	f.a = put(t, s, asl.Untagged([]byte("hello, ")))
	f.b = put(t, s, asl.Untagged([]byte("amduat\n")))
	seed, err := pel.SeedArtifact(pel.SeedConcat)
	if err != nil {
		t.Fatal(err)
	}
	f.concat = put(t, s, seed)
	f.greet = putProgramJSON(t, s, greetJSON)
	f.broken = putProgramJSON(t, s, brokenJSON)
	f.concatOK = run(t, s, surf.Request{ProgramRef: f.concat, InputRefs: []asl.Reference{f.a, f.b}})
	f.concatBad = run(t, s, surf.Request{ProgramRef: f.concat, InputRefs: []asl.Reference{f.a}})
	f.greetOK = run(t, s, surf.Request{ProgramRef: f.greet, InputRefs: []asl.Reference{f.b}})
	f.brokenRun = run(t, s, surf.Request{ProgramRef: f.broken, InputRefs: []asl.Reference{f.a}})
	for name, r := range map[string]*surf.Run{"concat ok": f.concatOK, "greet": f.greetOK} {
		if st := r.Result.Value.Status; st != pel.StatusOK {
			t.Fatalf("%s run: status %s", name, st)
		}
	}
	if st := f.concatBad.Result.Value.Status; st != pel.StatusInvalidInputs {
		t.Fatalf("concat with one input: status %s", st)
	}
	if st := f.brokenRun.Result.Value.Status; st != pel.StatusRuntimeFailed {
		t.Fatalf("broken run: status %s", st)
	}
	return f
}

// get requests path from h and returns the response and its body.
func get(t testing.TB, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	res := w.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}
