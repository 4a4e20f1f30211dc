package server

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The text exposition format 0.0.4 as /metrics writes it: HELP and TYPE
// comments and samples without timestamps.
var (
	expoHelp   = regexp.MustCompile(`^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$`)
	expoType   = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$`)
	expoSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\n"])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\n"])*")*\})? (\S+)$`)
)

// TestMetricsExposition checks /metrics line by line against the text
// format, that its families come sorted by name with HELP and TYPE before
// their samples, that two scrapes list the same families in the same
// order, and that every family SPECS.md §18.8, §18.11 and §18.12 document
// is there.
func TestMetricsExposition(t *testing.T) {
	t.Parallel()
	_, ts, _ := newTestServer(t, Config{Limits: Limits{MaxStoreBytes: 1 << 30}})
	if r := do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("hello")}); r.status != 200 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	scrape := func() (families []string, types map[string]string) {
		r := do(t, ts, call{method: "GET", path: "/metrics"})
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
			t.Fatalf("/metrics: %d %q", r.status, r.header.Get("Content-Type"))
		}
		types = map[string]string{}
		var fam string
		for i, line := range strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n") {
			if m := expoHelp.FindStringSubmatch(line); m != nil {
				fam = m[1]
				families = append(families, fam)
				continue
			}
			if m := expoType.FindStringSubmatch(line); m != nil {
				if m[1] != fam || types[fam] != "" {
					t.Fatalf("line %d: TYPE of %s not after its HELP: %q", i+1, m[1], line)
				}
				types[fam] = m[2]
				continue
			}
			m := expoSample.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("line %d: not exposition text: %q", i+1, line)
			}
			if base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count"); m[1] != fam && (types[fam] != "histogram" || base != fam) {
				t.Fatalf("line %d: sample %s in family %s", i+1, m[1], fam)
			}
			if _, err := strconv.ParseFloat(m[2], 64); err != nil {
				t.Fatalf("line %d: value: %v", i+1, err)
			}
		}
		if !slices.IsSorted(families) {
			t.Fatalf("families not sorted: %v", families)
		}
		return families, types
	}
	first, types := scrape()
	if second, _ := scrape(); !slices.Equal(first, second) {
		t.Fatalf("two scrapes list different families:\n%v\n%v", first, second)
	}
	for name, typ := range map[string]string{
		"amduat_http_requests_total": "counter", "amduat_http_request_duration_seconds": "histogram",
		"amduat_http_request_bytes_total": "counter", "amduat_http_response_bytes_total": "counter",
		"amduat_store_puts_total": "counter", "amduat_store_put_bytes_total": "counter",
		"amduat_store_gets_total": "counter", "amduat_store_get_bytes_total": "counter",
		"amduat_runs_total": "counter", "amduat_run_cache_total": "counter", "amduat_runs_active": "gauge",
		"amduat_run_queue_length": "gauge", "amduat_run_queue_capacity": "gauge",
		"amduat_run_queue_wait_seconds": "histogram", "amduat_run_queue_refused_total": "counter",
		"amduat_store_evicted_total": "counter", "amduat_store_evicted_bytes_total": "counter",
		"amduat_store_size_bytes": "gauge", "amduat_store_max_size_bytes": "gauge",
		"amduat_plan_events_total": "counter", "amduat_plan_step_transitions_total": "counter",
		"amduat_plan_step_failures_total": "counter", "amduat_plan_runs_total": "counter",
		"go_goroutines": "gauge", "go_threads": "gauge", "go_info": "gauge", "go_memstats_alloc_bytes_total": "counter",
		"go_memstats_heap_alloc_bytes": "gauge", "go_memstats_sys_bytes": "gauge", "go_gc_cycles_total": "counter",
		"process_cpu_seconds_total": "counter", "process_resident_memory_bytes": "gauge", "process_open_fds": "gauge",
	} {
		if types[name] != typ {
			t.Errorf("family %s: type %q, want %q", name, types[name], typ)
		}
	}
}
