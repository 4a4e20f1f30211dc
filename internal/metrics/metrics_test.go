package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The strict grammar of the text exposition format 0.0.4 as WriteText
// emits it (no timestamps, no blank lines, no other comments).
var (
	helpLine   = regexp.MustCompile(`^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$`)
	typeLine   = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\n"])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\n"])*")*)\})? (\S+)$`)
)

// parseText checks text against the grammar and the format's rules: every
// family has HELP then TYPE before its samples, a family's name appears
// once, a sample's name is its family's (with _bucket, _sum or _count for
// a histogram), values parse as floats, and a histogram's buckets are
// cumulative and end at le="+Inf" equal to its _count. It returns the
// samples as "name{labels}" → value.
func parseText(t *testing.T, text string) map[string]float64 {
	t.Helper()
	if text != "" && !strings.HasSuffix(text, "\n") {
		t.Fatalf("exposition does not end in a newline")
	}
	out := map[string]float64{}
	seen := map[string]bool{}
	var fam, typ string
	var lastFam string
	var lastBucket float64
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if text == "" {
			break
		}
		if m := helpLine.FindStringSubmatch(line); m != nil {
			if seen[m[1]] {
				t.Fatalf("line %d: family %s twice", i+1, m[1])
			}
			if m[1] < lastFam {
				t.Fatalf("line %d: family %s after %s: not sorted", i+1, m[1], lastFam)
			}
			seen[m[1]], fam, typ, lastFam = true, m[1], "", m[1]
			continue
		}
		if m := typeLine.FindStringSubmatch(line); m != nil {
			if m[1] != fam || typ != "" {
				t.Fatalf("line %d: TYPE of %s not right after its HELP", i+1, m[1])
			}
			typ = m[2]
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %d: not exposition text: %q", i+1, line)
		}
		if typ == "" {
			t.Fatalf("line %d: sample before TYPE", i+1)
		}
		name := m[1]
		ok := name == fam
		if typ == "histogram" {
			ok = name == fam+"_bucket" || name == fam+"_sum" || name == fam+"_count"
		}
		if !ok {
			t.Fatalf("line %d: sample %s in family %s (%s)", i+1, name, fam, typ)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("line %d: value %q: %v", i+1, m[3], err)
		}
		if name == fam+"_bucket" {
			if strings.HasSuffix(m[2], `le="+Inf"}`) {
				lastBucket = v
			} else if v < 0 {
				t.Fatalf("line %d: negative bucket", i+1)
			}
		}
		if name == fam+"_count" && v != lastBucket {
			t.Fatalf("line %d: count %v differs from the +Inf bucket %v", i+1, v, lastBucket)
		}
		key := name + m[2]
		if _, dup := out[key]; dup {
			t.Fatalf("line %d: series %s twice", i+1, key)
		}
		out[key] = v
	}
	return out
}

// fixture is a registry with one metric of each kind and values that
// exercise escaping and number formatting.
func fixture(t *testing.T) *Registry {
	r := NewRegistry()
	req := NewCounterVec(Opts{"app_requests_total", "Requests by route, method and code."}, []string{"route", "method", "code"})
	req.WithLabelValues("GET /b", "GET", "200").Add(3)
	req.WithLabelValues("GET /a", "GET", "404").Inc()
	req.WithLabelValues("POST /a", "POST", "200").Add(1.5)
	req.WithLabelValues(`q"uote\back`+"\nline", "GET", "500").Inc()
	lat := NewHistogramVec(Opts{"app_latency_seconds", "Latency\nby route."}, ExponentialBuckets(0.001, 10, 3), []string{"route"})
	for _, v := range []float64{0.0005, 0.001, 0.002, 0.5, 7} {
		lat.WithLabelValues("GET /a").Observe(v)
	}
	lat.WithLabelValues("GET /b").Observe(0.05)
	h := NewHistogram(Opts{"app_wait_seconds", "Wait."}, []float64{1, 2})
	h.Observe(1.5)
	c := NewCounter(Opts{"app_bytes_total", `Bytes \ in.`})
	c.Add(1 << 40)
	c.Add(-5) // ignored
	g := NewGauge(Opts{"app_size_bytes", "Size."})
	g.Set(12345678901)
	big := NewGauge(Opts{"app_big", "Beyond 2^53."})
	big.Set(1e300)
	f := NewGaugeFunc(Opts{"app_active", "Active."}, func() float64 { return 2 })
	for _, col := range []Collector{req, lat, h, c, g, big, f} {
		if err := r.Register(col); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func render(t *testing.T, r *Registry) string {
	var b bytes.Buffer
	if err := WriteText(&b, r.Gather()); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestExpositionGolden compares the fixture's exposition with
// testdata/exposition.golden (regenerate deliberately with
// AMDUAT_UPDATE_GOLDEN=1) and parses it strictly.
func TestExpositionGolden(t *testing.T) {
	got := render(t, fixture(t))
	path := filepath.Join("testdata", "exposition.golden")
	if os.Getenv("AMDUAT_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("exposition differs from %s:\n%s", path, got)
	}
	s := parseText(t, got)
	for key, v := range map[string]float64{
		`app_requests_total{code="200",method="GET",route="GET /b"}`: 3,
		`app_latency_seconds_bucket{route="GET /a",le="0.001"}`:      2,
		`app_latency_seconds_bucket{route="GET /a",le="+Inf"}`:       5,
		`app_latency_seconds_count{route="GET /a"}`:                  5,
		`app_wait_seconds_bucket{le="1"}`:                            0,
		`app_wait_seconds_bucket{le="2"}`:                            1,
		`app_bytes_total`:                                            1 << 40,
		`app_size_bytes`:                                             12345678901,
		`app_big`:                                                    1e300,
	} {
		if s[key] != v {
			t.Errorf("%s = %v, want %v", key, s[key], v)
		}
	}
	if again := render(t, fixture(t)); again != got {
		t.Fatal("two registries with the same values render differently")
	}
}

func TestRegisterDuplicate(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(NewCounter(Opts{"x_total", "X."})); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(NewGauge(Opts{"x_total", "X again."})); !errors.Is(err, ErrAlreadyRegistered) {
		t.Fatalf("duplicate name: got %v, want ErrAlreadyRegistered", err)
	}
	if err := r.Register(NewGoCollector()); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(NewGoCollector()); !errors.Is(err, ErrAlreadyRegistered) {
		t.Fatalf("second Go collector: got %v", err)
	}
}

func TestInvalidDefinitionsPanic(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"empty name", func() { NewCounter(Opts{"", "h"}) }},
		{"name with dash", func() { NewGauge(Opts{"a-b", "h"}) }},
		{"name starting with a digit", func() { NewGauge(Opts{"1a", "h"}) }},
		{"label with colon", func() { NewCounterVec(Opts{"a", "h"}, []string{"x:y"}) }},
		{"reserved label", func() { NewCounterVec(Opts{"a", "h"}, []string{"__x"}) }},
		{"label twice", func() { NewCounterVec(Opts{"a", "h"}, []string{"x", "x"}) }},
		{"le on a histogram", func() { NewHistogramVec(Opts{"a", "h"}, []float64{1}, []string{"le"}) }},
		{"buckets not ascending", func() { NewHistogram(Opts{"a", "h"}, []float64{2, 1}) }},
		{"infinite bucket", func() { NewHistogram(Opts{"a", "h"}, []float64{1, math.Inf(1)}) }},
		{"wrong label count", func() { NewCounterVec(Opts{"a", "h"}, []string{"x"}).WithLabelValues("1", "2") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.f()
		})
	}
}

// TestRuntimeCollectors checks that the Go and process families are
// produced, parse, and carry plausible values.
func TestRuntimeCollectors(t *testing.T) {
	r := NewRegistry()
	for _, c := range []Collector{NewGoCollector(), NewProcessCollector()} {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	s := parseText(t, render(t, r))
	for _, name := range []string{"go_goroutines", "go_threads", "go_memstats_alloc_bytes_total", "go_memstats_sys_bytes", "go_sched_gomaxprocs_threads"} {
		if s[name] <= 0 {
			t.Errorf("%s = %v, want > 0", name, s[name])
		}
	}
	if _, ok := s[fmt.Sprintf(`go_info{version=%q}`, runtime.Version())]; !ok {
		t.Errorf("no go_info series")
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		for _, name := range []string{"process_resident_memory_bytes", "process_virtual_memory_bytes", "process_start_time_seconds", "process_open_fds", "process_max_fds"} {
			if s[name] <= 0 {
				t.Errorf("%s = %v, want > 0", name, s[name])
			}
		}
		if _, ok := s["process_cpu_seconds_total"]; !ok {
			t.Error("no process_cpu_seconds_total")
		}
	}
}

// TestConcurrentUpdates updates series from many goroutines while
// scraping; under -race it checks the locking, and the totals must add up.
func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	c := NewCounterVec(Opts{"c_total", "C."}, []string{"k"})
	h := NewHistogram(Opts{"h_seconds", "H."}, []float64{0.5})
	for _, col := range []Collector{c, h} {
		if err := r.Register(col); err != nil {
			t.Fatal(err)
		}
	}
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				c.WithLabelValues(strconv.Itoa(i % 3)).Inc()
				h.Observe(float64(w % 2))
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			var b bytes.Buffer
			WriteText(&b, r.Gather())
		}
	})
	wg.Wait()
	s := parseText(t, render(t, r))
	var sum float64
	for k := range 3 {
		sum += s[fmt.Sprintf(`c_total{k="%d"}`, k)]
	}
	if sum != workers*each || s["h_seconds_count"] != workers*each || s[`h_seconds_bucket{le="0.5"}`] != workers*each/2 {
		t.Fatalf("totals: counters %v, histogram count %v, le=0.5 %v", sum, s["h_seconds_count"], s[`h_seconds_bucket{le="0.5"}`])
	}
}
