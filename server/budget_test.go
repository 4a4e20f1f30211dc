package server

import (
	"encoding/json"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/report"
)

// TestRunMemoryBudget: a run whose outputs in memory exceed the server's
// per-run memory budget is an internal failure: 500 "internal", and the
// server stores nothing for it (SPECS.md §12.8, §18.2). (A concat would
// not do: it refers to its inputs' bytes and holds none, §12.9.)
func TestRunMemoryBudget(t *testing.T) {
	t.Parallel()
	_, ts, st := newTestServer(t, Config{Limits: Limits{RunMemoryBudget: 10}})
	built := do(t, ts, call{method: "POST", path: "/v1/pel/programs",
		body: []byte(`{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"eleven byte"}}],"roots":[{"node":1}]}`)})
	var b report.Build
	if built.status != 200 || json.Unmarshal(built.body, &b) != nil || !b.Valid {
		t.Fatalf("build: %d %s", built.status, built.body)
	}
	prog := b.Ref
	count := func() int {
		n := 0
		if err := st.Enumerate(t.Context(), asl.Reference{}, func(asl.Info) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	body, _ := json.Marshal(report.RunRequest{ProgramRef: prog})
	r := do(t, ts, call{method: "POST", path: "/v1/pel/run", body: body})
	if r.status != 500 || errorCode(t, r) != httpstore.CodeInternal {
		t.Fatalf("run over the budget: %d %s, want 500 internal", r.status, r.body)
	}
	if after := count(); after != before {
		t.Fatalf("the store went from %d to %d artifacts on an internal failure", before, after)
	}
}
