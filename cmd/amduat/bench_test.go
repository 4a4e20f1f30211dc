package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/amduat/amduat/bench"
	"github.com/amduat/amduat/internal/longtest"
)

// TestBenchQuickSmoke runs light groups of `amduat bench --quick` through
// the real binary (each group in its child process) and checks the shape
// of the JSON report, not the timings. The default run takes small and
// surface (about 2 CPU-seconds); AMDUAT_LONG=1 adds exec, whose quick
// 100,000-node programs cost some 5 CPU-seconds (internal/longtest; issue
// 25).
func TestBenchQuickSmoke(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	groups := []string{"small", "surface"}
	want := []string{
		"small/put-batch", "small/put-batch-10000", "small/put-vs-fsync", "small/get-random",
		"surface/run-p50", "surface/run-p99", "surface/cache-hit-p50",
	}
	if longtest.Enabled() {
		groups = []string{"small", "exec", "surface"}
		want = slices.Insert(want, 4,
			"exec/chain/order", "exec/chain/overhead", "exec/chain/alloc", "exec/chain/peak-heap",
			"exec/fanin/order", "exec/fanin/overhead", "exec/fanin/alloc", "exec/fanin/peak-heap")
	}
	r := c.must(0, "bench", "--quick", "--only", strings.Join(groups, ","), "--dir", dir, "--json")
	var rep bench.Report
	oneJSON(t, r.stdout, &rep)
	if !rep.Quick || rep.Sizes != bench.QuickSizes() || rep.Machine.CPUs < 1 || rep.RSSMethod == "" {
		t.Fatalf("report header %+v", rep)
	}
	var got []string
	for _, row := range rep.Rows {
		got = append(got, row.Name)
		if row.Baseline == nil || row.Baseline.What == "" || !(row.Baseline.Value > 0) {
			t.Errorf("%s: baseline %+v", row.Name, row.Baseline)
		}
		if row.Figure.Unit == "" || (!(row.Figure.Value > 0) && !strings.HasSuffix(row.Name, "/overhead")) {
			t.Errorf("%s: figure %+v", row.Name, row.Figure)
		}
		if !slices.Contains([]bench.Met{bench.MetYes, bench.MetNo, bench.MetNA}, row.Met) || (row.Target == nil) != (row.Met == bench.MetNA) {
			t.Errorf("%s: met %q with target %+v", row.Name, row.Met, row.Target)
		}
		// Met must follow from the numbers printed.
		check := row
		check.Evaluate()
		if check.Met != row.Met {
			t.Errorf("%s: met %q, but the figures give %q", row.Name, row.Met, check.Met)
		}
		if rep.RSSMethod != bench.RSSNone && row.PeakRSS == nil {
			t.Errorf("%s: no peak RSS", row.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for i, g := range groups {
		if line := fmt.Sprintf("bench: [%d/%d] %s:", i+1, len(groups), g); !strings.Contains(r.stderr, line) {
			t.Errorf("stderr lacks the progress line %q: %q", line, r.stderr)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("bench left %d entries in --dir", len(left))
	}
}

// TestBenchTable checks the human output of one quick group.
func TestBenchTable(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.must(0, "bench", "--quick", "--only", "surface", "--dir", t.TempDir())
	out := r.stdout
	if !strings.HasPrefix(out, "ROW ") || !strings.Contains(out, "surface/run-p50") || !strings.Contains(out, "\nTargets: ") {
		t.Fatalf("table output:\n%s", out)
	}
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.must(exitUsage, "bench", "--only", "nope")
	oneErrorLine(t, r, "bench")
	if !strings.Contains(r.stderr, "known: large-random, large-text, small, cli, startup, snapshot, exec, surface") {
		t.Errorf("error does not list the groups: %q", r.stderr)
	}
	r = c.must(exitUsage, "bench", "extra")
	oneErrorLine(t, r, "bench")
	r = c.must(exitUsage, "bench", "--child", "nope")
	oneErrorLine(t, r, "bench")
	r = c.must(exitIO, "bench", "--only", "exec", "--dir", c.cwd+"/does-not-exist")
	oneErrorLine(t, r, "bench")
}
