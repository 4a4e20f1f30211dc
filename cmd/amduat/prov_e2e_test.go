package main

import (
	"strings"
	"testing"

	"github.com/amduat/amduat/report"
)

func TestProvWhyAndUses(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	a := c.putData([]byte("a"))
	b := c.putData([]byte("b"))
	first := strings.TrimSpace(c.must(0, "pel", "run", "-q", "--program", prog, "--input", a, "--input", b).stdout)
	second := strings.TrimSpace(c.must(0, "pel", "run", "-q", "--program", prog, "--input", first, "--input", a).stdout)

	var why report.Graph
	oneJSON(t, c.must(0, "--json", "prov", "why", second).stdout, &why)
	if why.Root.String() != second || len(why.Edges) != 2 || why.Truncated {
		t.Fatalf("why = %+v", why)
	}
	depth := map[string]int{}
	for _, art := range why.Artifacts {
		depth[art.Ref.String()] = art.Depth
	}
	if depth[first] != 1 || depth[b] != 2 || depth[prog] != 1 {
		t.Fatalf("depths = %v", depth)
	}
	oneJSON(t, c.must(0, "--json", "prov", "why", "--depth", "1", second).stdout, &why)
	if len(why.Edges) != 1 || !why.Truncated {
		t.Fatalf("why --depth 1 = %d edges, truncated %v", len(why.Edges), why.Truncated)
	}
	text := c.must(0, "prov", "why", second).stdout
	if !strings.Contains(text, "produced by run") || !strings.HasSuffix(text, "5 artifacts, 2 runs\n") {
		t.Fatalf("why text:\n%s", text)
	}
	dot := c.must(0, "prov", "why", "--dot", second).stdout
	if !strings.HasPrefix(dot, "digraph provenance {") || !strings.Contains(dot, "shape=box") {
		t.Fatalf("why --dot:\n%s", dot)
	}
	if again := c.must(0, "prov", "why", "--dot", second).stdout; again != dot {
		t.Fatal("prov why --dot is not deterministic")
	}
	// --dot with --json: the same DOT text in {"ref","dot"}, as pel show.
	var dj struct {
		Ref string `json:"ref"`
		Dot string `json:"dot"`
	}
	oneJSON(t, c.must(0, "--json", "prov", "why", "--dot", second).stdout, &dj)
	if dj.Ref != second || dj.Dot != dot {
		t.Fatalf("why --dot --json = %+v, want ref %s and the DOT text", dj, second)
	}

	var uses report.Graph
	oneJSON(t, c.must(0, "--json", "prov", "uses", a).stdout, &uses)
	if len(uses.Edges) != 2 {
		t.Fatalf("uses(a) = %d edges, want both runs", len(uses.Edges))
	}
	// An artifact nothing was computed from, or that no run produced.
	oneJSON(t, c.must(0, "--json", "prov", "why", a).stdout, &why)
	if len(why.Edges) != 0 || len(why.Artifacts) != 1 {
		t.Fatalf("why(input) = %+v", why)
	}
	if r := c.must(0, "--json", "prov", "reindex").stdout; !strings.Contains(r, `"edges":2,"skipped":0`) {
		t.Fatalf("reindex = %s", r)
	}
	c.must(2, "prov", "why", "not-a-ref")
}

func TestPELCacheSalt(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "const").stdout)
	cacheOf := func() string {
		var j report.Run
		oneJSON(t, c.must(0, "--json", "pel", "run", "--program", prog).stdout, &j)
		return j.Cache
	}
	if got := []string{cacheOf(), cacheOf()}; got[0] != "miss" || got[1] != "hit" {
		t.Fatalf("cache = %v, want miss then hit", got)
	}
	if out := c.must(0, "pel", "cache", "salt", "--set", "rotated").stdout; out != "salt \"rotated\"\n" {
		t.Fatalf("salt --set printed %q", out)
	}
	if got := []string{cacheOf(), cacheOf()}; got[0] != "miss" || got[1] != "hit" {
		t.Fatalf("cache after a new salt = %v, want miss then hit", got)
	}
}

// TestPELVerifyCatchesAlteredTrace damages the stored trace of a run on
// disk; replay verification must name the trace and exit 1.
func TestPELVerifyCatchesAlteredTrace(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "slice").stdout)
	in := c.putData([]byte("abcdef"))
	var run report.Run
	oneJSON(t, c.must(0, "--json", "pel", "run", "--program", prog, "--input", in).stdout, &run)
	c.must(0, "pel", "verify", run.ResultRef.String())

	traceBytes := []byte(c.must(0, "get", run.TraceRef.String()).stdout)
	needle := traceBytes[len(traceBytes)-12:]
	if n := corrupt(t, c.store, needle); n != 1 {
		t.Fatalf("the end of the trace was found in %d stored values, want 1", n)
	}
	r := c.must(exitNegative, "pel", "verify", run.ResultRef.String())
	oneErrorLine(t, r, "pel verify")
	if !strings.Contains(r.stdout, "mismatch trace stored "+run.TraceRef.String()) || !strings.Contains(r.stdout, "ERR_INTEGRITY") {
		t.Fatalf("verify of an altered trace printed %q", r.stdout)
	}
	t.Logf("pel verify on an altered trace: exit %d\n%s%s", r.code, r.stdout, r.stderr)
}
