package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/closure"
	"github.com/amduat/amduat/report"
)

// TestEvictLRU fills a store, pins a run's result, then serves it with a
// bound just below its size: one eviction round deletes exactly the least
// recently used unprotected artifacts (never touched through this server,
// so in ReferenceBytes order) down to the low-water mark; what the pin
// reaches and what was read stays; /metrics counts it.
func TestEvictLRU(t *testing.T) {
	t.Parallel()
	st, err := pebblestore.Create(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	var arts []asl.Reference
	for i := 0; i < 12; i++ {
		b := make([]byte, 1000)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged(b))
		if err != nil {
			t.Fatal(err)
		}
		arts = append(arts, ref)
	}
	// A run over arts[0] and arts[1] through a server without a bound; its
	// result pinned.
	s0, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ts0 := httptest.NewServer(s0.Handler())
	defer ts0.Close()
	prog := putProgram(t, ts0)
	body, _ := json.Marshal(report.RunRequest{ProgramRef: prog, InputRefs: arts[:2]})
	r := do(t, ts0, call{method: "POST", path: "/v1/pel/run", body: body})
	var run report.Run
	if r.status != 200 || json.Unmarshal(r.body, &run) != nil || run.Status != "OK" {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	if err := st.Pin(ctx, "run", run.ResultRef, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	protected := map[asl.Reference]bool{}
	if err := closure.Walk(ctx, st, []asl.Reference{run.ResultRef}, func(n closure.Node) error { protected[n.Ref] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []asl.Reference{run.ResultRef, run.TraceRef, run.OutputRefs[0], prog, arts[0], arts[1]} {
		if !protected[ref] {
			t.Fatalf("%s is not in the pin's closure", ref)
		}
	}
	size := map[asl.Reference]int64{}
	var total int64
	st.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error { size[in.Ref] = in.StoredSize; total += in.StoredSize; return nil })

	max := total - 1
	s, err := New(Config{Store: st, Limits: Limits{MaxStoreBytes: uint64(max)}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	// Read the artifact that would go first: it becomes the most recent.
	var order []asl.Reference
	for ref := range size {
		if !protected[ref] {
			order = append(order, ref)
		}
	}
	slices.SortFunc(order, func(a, b asl.Reference) int { return bytes.Compare(a.Bytes(), b.Bytes()) })
	read := order[0]
	if r := do(t, ts, call{method: "GET", path: "/v1/artifacts/" + read.String()}); r.status != 200 {
		t.Fatalf("get: %d", r.status)
	}
	order = append(order[1:], read)
	target := int64(float64(max) * evictLowWater)
	var want []asl.Reference
	left := total
	for _, ref := range order {
		if left <= target {
			break
		}
		want = append(want, ref)
		left -= size[ref]
	}

	rep, err := s.Evict(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Evicted != int64(len(want)) || rep.After != left || rep.Size != total || rep.Protected != int64(len(protected)) {
		t.Fatalf("eviction %+v, want %d evicted, %d -> %d bytes, %d protected", rep, len(want), total, left, len(protected))
	}
	for ref := range size {
		ok, err := asl.Has(ctx, st, ref)
		if err != nil {
			t.Fatal(err)
		}
		if gone := slices.Contains(want, ref); ok == gone {
			t.Errorf("%s: stored %v, evicted expected %v (protected %v)", ref, ok, gone, protected[ref])
		}
	}
	metrics := string(do(t, ts, call{method: "GET", path: "/metrics"}).body)
	var bytesN int64
	for _, ref := range want {
		bytesN += size[ref]
	}
	for _, line := range []string{
		fmt.Sprintf("amduat_store_evicted_total %d", len(want)),
		fmt.Sprintf("amduat_store_evicted_bytes_total %d", bytesN),
		fmt.Sprintf("amduat_store_size_bytes %d", left),
		fmt.Sprintf("amduat_store_max_size_bytes %d", max),
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	// Under the bound, a round deletes nothing.
	if rep, err := s.Evict(ctx); err != nil || rep.Evicted != 0 {
		t.Fatalf("second round: %+v %v", rep, err)
	}
	t.Logf("%d artifacts, %d bytes; bound %d, low water %d: evicted %d (%d bytes), %d protected", len(size), total, max, target, len(want), bytesN, len(protected))
}

// TestEvictPinnedAboveBound: when what the pins reach alone passes the
// bound, every other artifact goes and no protected one.
func TestEvictPinnedAboveBound(t *testing.T) {
	t.Parallel()
	_, ts, st := newTestServer(t, Config{})
	ctx := t.Context()
	pinned, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged(bytes.Repeat([]byte{7}, 5000)))
	if err != nil {
		t.Fatal(err)
	}
	st.Pin(ctx, "big", pinned, asl.PinOptions{})
	loose, _ := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged([]byte("loose")))
	ts.Close()
	s, err := New(Config{Store: st, Limits: Limits{MaxStoreBytes: 10}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Evict(ctx)
	if err != nil || rep.Evicted != 1 || rep.Protected != 1 {
		t.Fatalf("eviction %+v %v", rep, err)
	}
	if ok, _ := asl.Has(ctx, st, pinned); !ok {
		t.Fatal("the pinned artifact was evicted")
	}
	if ok, _ := asl.Has(ctx, st, loose); ok {
		t.Fatal("the loose artifact was kept")
	}
}
