package server

import (
	"encoding/json"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/report"
)

// TestRunMemoryBudget: a run whose declared outputs exceed the server's
// per-run memory budget is an internal failure: 500 "internal", and the
// server stores nothing for it (SPECS.md §12.8, §18.2).
func TestRunMemoryBudget(t *testing.T) {
	_, ts, st := newTestServer(t, Config{Limits: Limits{RunMemoryBudget: 10}})
	prog := putProgram(t, ts) // concat(input 0, input 1)
	a := do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("hello, ")})
	b := do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("amduat\n")})
	if a.status != 200 || b.status != 200 {
		t.Fatalf("puts: %d %d", a.status, b.status)
	}
	count := func() int {
		n := 0
		if err := st.Enumerate(t.Context(), asl.Reference{}, func(asl.Info) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	body, _ := json.Marshal(report.RunRequest{ProgramRef: prog, InputRefs: []asl.Reference{
		asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hello, "))),
		asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("amduat\n"))),
	}})
	r := do(t, ts, call{method: "POST", path: "/v1/pel/run", body: body})
	if r.status != 500 || errorCode(t, r) != httpstore.CodeInternal {
		t.Fatalf("run over the budget: %d %s, want 500 internal", r.status, r.body)
	}
	if after := count(); after != before {
		t.Fatalf("the store went from %d to %d artifacts on an internal failure", before, after)
	}
}
