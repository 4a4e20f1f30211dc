package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/internal/golden"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"one value", []float64{7}, 50, 7},
		{"p50 of odd count is the middle", []float64{5, 1, 3}, 50, 3},
		{"p50 of even count is the lower middle", []float64{4, 1, 3, 2}, 50, 2},
		{"p100 is the max", []float64{4, 9, 1}, 100, 9},
		{"small p is the min", []float64{4, 9, 1}, 1, 1},
		{"p99 of 200 is the 198th", seq(200), 99, 198},
		{"p99 of 100 is the 99th", seq(100), 99, 99},
		{"p99 of 50 is the max", seq(50), 99, 50},
		{"p50 of 200 is the 100th", seq(200), 50, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := append([]float64(nil), tc.xs...)
			if got := Percentile(tc.xs, tc.p); got != tc.want {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
			}
			for i := range orig {
				if orig[i] != tc.xs[i] {
					t.Fatal("Percentile modified its input")
				}
			}
		})
	}
	for _, p := range []float64{0, -1, 101, math.NaN()} {
		if got := Percentile([]float64{1, 2}, p); !math.IsNaN(got) {
			t.Errorf("Percentile(p=%v) = %v, want NaN", p, got)
		}
	}
	if got := Percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("Percentile of nothing = %v, want NaN", got)
	}
}

// seq returns n, n-1, ..., 1 (descending, to exercise the sort).
func seq(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(n - i)
	}
	return xs
}

func ptr[T any](v T) *T { return &v }

func TestEvaluate(t *testing.T) {
	base := func(v float64) *Baseline { return &Baseline{Value: v, Unit: "u", What: "w"} }
	tests := []struct {
		name      string
		row       Row
		wantRatio *float64
		want      Met
	}{
		{"ratio at least, met", Row{Figure: Quantity{70, "u"}, Baseline: base(100), Target: &Target{On: OnRatio, Cmp: AtLeast, Value: 0.7}}, ptr(0.7), MetYes},
		{"ratio at least, missed", Row{Figure: Quantity{69, "u"}, Baseline: base(100), Target: &Target{On: OnRatio, Cmp: AtLeast, Value: 0.7}}, ptr(0.69), MetNo},
		{"ratio at most, met", Row{Figure: Quantity{11, "u"}, Baseline: base(10), Target: &Target{On: OnRatio, Cmp: AtMost, Value: 1.1}}, ptr(1.1), MetYes},
		{"ratio at most, missed", Row{Figure: Quantity{12, "u"}, Baseline: base(10), Target: &Target{On: OnRatio, Cmp: AtMost, Value: 1.1}}, ptr(1.2), MetNo},
		{"figure at least ignores the baseline", Row{Figure: Quantity{250000, "u"}, Baseline: base(1e9), Target: &Target{On: OnFigure, Cmp: AtLeast, Value: 250000}}, ptr(250000 / 1e9), MetYes},
		{"figure at most, missed", Row{Figure: Quantity{1000.5, "u"}, Target: &Target{On: OnFigure, Cmp: AtMost, Value: 1000}}, nil, MetNo},
		{"no target", Row{Figure: Quantity{1, "u"}, Baseline: base(2)}, ptr(0.5), MetNA},
		{"ratio target without a baseline", Row{Figure: Quantity{1, "u"}, Target: &Target{On: OnRatio, Cmp: AtLeast, Value: 1}}, nil, MetNA},
		{"zero baseline gives no ratio", Row{Figure: Quantity{1, "u"}, Baseline: base(0), Target: &Target{On: OnRatio, Cmp: AtLeast, Value: 1}}, nil, MetNA},
		{"skipped row", Row{Figure: Quantity{100, "u"}, Baseline: base(1), Skipped: true, Target: &Target{On: OnRatio, Cmp: AtLeast, Value: 10}}, nil, MetNA},
		{"NaN figure", Row{Figure: Quantity{math.NaN(), "u"}, Target: &Target{On: OnFigure, Cmp: AtMost, Value: 5}}, nil, MetNA},
		{"unknown comparison", Row{Figure: Quantity{1, "u"}, Target: &Target{On: OnFigure, Cmp: "==", Value: 1}}, nil, MetNA},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.row
			r.Met = "stale"
			r.Evaluate()
			if r.Met != tc.want {
				t.Errorf("Met = %q, want %q", r.Met, tc.want)
			}
			switch {
			case tc.wantRatio == nil && r.Ratio != nil:
				t.Errorf("Ratio = %v, want none", *r.Ratio)
			case tc.wantRatio != nil && (r.Ratio == nil || math.Abs(*r.Ratio-*tc.wantRatio) > 1e-12):
				t.Errorf("Ratio = %v, want %v", r.Ratio, *tc.wantRatio)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0.00"},
		{0.000123456, "0.000123"},
		{0.5, "0.5"},
		{1.234, "1.23"},
		{12.345, "12.3"},
		{123.45, "123"},
		{1234.5, "1,234"},
		{1234567, "1,234,567"},
		{-2500, "-2,500"},
		{math.Inf(1), "+Inf"},
	}
	for _, tc := range tests {
		if got := formatValue(tc.v); got != tc.want {
			t.Errorf("formatValue(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// sampleReport is a fixed report covering every kind of cell.
func sampleReport() *Report {
	r := &Report{
		Quick: true, Sizes: QuickSizes(), RSSMethod: RSSReset,
		Machine: Machine{GOOS: "linux", GOARCH: "amd64", CPUs: 2, Go: "go1.26"},
		Rows: []Row{
			{Name: "large-random/put", Figure: Quantity{512.5, "MiB/s"}, Baseline: &Baseline{1024, "MiB/s", "SHA-256 of same stream"},
				Target: &Target{">= 0.7x baseline", OnRatio, AtLeast, 0.7}, PeakRSS: ptr(int64(40 << 20)), Note: "a note"},
			{Name: "small/put-batch", Figure: Quantity{300000, "artifacts/s"}, Baseline: &Baseline{1.5e6, "artifacts/s", "SHA-256"},
				Target: &Target{">= 250,000/s", OnFigure, AtLeast, 250000}, PeakRSS: ptr(int64(50 << 20))},
			{Name: "cli/put-files", Figure: Quantity{0, "files/s"}, Target: &Target{">= 10x baseline", OnRatio, AtLeast, 10},
				Skipped: true, Note: "git is not installed"},
			{Name: "surface/cache-hit-p50", Figure: Quantity{0.125, "ms"}, Baseline: &Baseline{1.25, "ms", "fresh run p50"}},
		},
	}
	for i := range r.Rows {
		r.Rows[i].Evaluate()
	}
	return r
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "table.golden", b.Bytes())
	lines := strings.Split(b.String(), "\n")
	// Every table line (header and rows) has the same width up to its
	// last column, which is right-aligned: the PEAK RSS column ends at the
	// same place on every line that has it.
	end := len([]rune(lines[0]))
	for _, l := range lines[1:3] {
		if len([]rune(l)) != end {
			t.Errorf("row %q is %d wide, header %d", l, len([]rune(l)), end)
		}
	}
	for _, want := range []string{"0.5x", "yes", "n.a.", "skipped", "Targets: 1 met, 1 missed, 2 n.a. (quick sizes"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "report.golden.json", b.Bytes())
	if bytes.Count(b.Bytes(), []byte("\n")) != 1 {
		t.Fatal("report is not one line of JSON")
	}
	var generic struct {
		Quick bool
		Rows  []map[string]json.RawMessage
	}
	if err := json.Unmarshal(b.Bytes(), &generic); err != nil {
		t.Fatal(err)
	}
	for _, row := range generic.Rows {
		for _, k := range []string{"name", "figure", "baseline", "ratio", "target", "met", "peak_rss_bytes"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row %s lacks key %q", row["name"], k)
			}
		}
	}
	var back Report
	d := json.NewDecoder(&b)
	d.DisallowUnknownFields()
	if err := d.Decode(&back); err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != 4 || back.Rows[0].Met != MetNo || *back.Rows[0].Ratio != 512.5/1024 || back.Rows[2].Baseline != nil {
		t.Fatalf("round trip lost data: %+v", back.Rows)
	}
}

func TestSelect(t *testing.T) {
	names := func(gs []Group) string {
		var s []string
		for _, g := range gs {
			s = append(s, g.Name)
		}
		return strings.Join(s, ",")
	}
	tests := []struct {
		in      []string
		want    string
		wantErr bool
	}{
		{nil, "large-random,large-text,small,cli,startup,snapshot,exec,surface,lazy,parallel,hostile,server,wasm,s3", false},
		{[]string{"s3", "wasm"}, "wasm,s3", false},
		{[]string{"s3", "server"}, "server,s3", false},
		{[]string{"startup", "cli"}, "cli,startup", false},
		{[]string{"surface", "exec"}, "exec,surface", false},
		{[]string{"large"}, "large-random,large-text", false},
		{[]string{"large-text", "large", " small "}, "large-random,large-text,small", false},
		{[]string{"exec", "exec"}, "exec", false},
		{[]string{"lar"}, "", true},
		{[]string{"nope"}, "", true},
	}
	for _, tc := range tests {
		gs, err := Select(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("Select(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if got := names(gs); !tc.wantErr && got != tc.want {
			t.Errorf("Select(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if _, ok := Lookup("exec"); !ok {
		t.Error("Lookup(exec) failed")
	}
	if _, ok := Lookup("large"); ok {
		t.Error("Lookup takes exact names only")
	}
}
