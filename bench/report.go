package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Quantity is a measured value with its unit ("MiB/s", "artifacts/s",
// "ns/node", "B/node", "MiB", "ms").
type Quantity struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

func (q Quantity) String() string { return formatValue(q.Value) + " " + q.Unit }

// Baseline is the reference a figure is compared with, measured in the same
// process run, and what it is.
type Baseline struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	What  string  `json:"what"`
}

// Comparison operators of a Target.
const (
	AtLeast = ">="
	AtMost  = "<="
)

// What a Target constrains.
const (
	OnFigure = "figure"
	OnRatio  = "ratio"
)

// Target is a goal for a row: On says whether it constrains the figure or
// the ratio figure/baseline; the row meets it when that value Cmp Value.
type Target struct {
	Text  string  `json:"text"`
	On    string  `json:"on"`
	Cmp   string  `json:"cmp"`
	Value float64 `json:"value"`
}

// Met is the outcome of a row against its target.
type Met string

const (
	MetYes Met = "yes"
	MetNo  Met = "no"
	MetNA  Met = "n.a." // no target, or the row was skipped
)

// Row is one line of the report. Ratio is Figure/Baseline when both exist
// and the baseline is positive; Met is derived by Evaluate. PeakRSS is the
// peak resident set size during the row's measurement, in bytes, or nil
// when it could not be measured.
type Row struct {
	Name     string    `json:"name"`
	Figure   Quantity  `json:"figure"`
	Baseline *Baseline `json:"baseline"`
	Ratio    *float64  `json:"ratio"`
	Target   *Target   `json:"target"`
	Met      Met       `json:"met"`
	PeakRSS  *int64    `json:"peak_rss_bytes"`
	Skipped  bool      `json:"skipped,omitempty"`
	Note     string    `json:"note,omitempty"`
}

// Evaluate fills Ratio and Met from the figure, baseline and target. A
// skipped row, a row without a target, or a ratio target without a ratio
// is n.a.
func (r *Row) Evaluate() {
	r.Ratio = nil
	if r.Baseline != nil && r.Baseline.Value > 0 && !r.Skipped {
		v := r.Figure.Value / r.Baseline.Value
		r.Ratio = &v
	}
	r.Met = MetNA
	if r.Target == nil || r.Skipped {
		return
	}
	var v float64
	switch r.Target.On {
	case OnFigure:
		v = r.Figure.Value
	case OnRatio:
		if r.Ratio == nil {
			return
		}
		v = *r.Ratio
	default:
		return
	}
	if math.IsNaN(v) {
		return
	}
	ok := false
	switch r.Target.Cmp {
	case AtLeast:
		ok = v >= r.Target.Value
	case AtMost:
		ok = v <= r.Target.Value
	default:
		return
	}
	r.Met = MetNo
	if ok {
		r.Met = MetYes
	}
}

// Report is the result of one `amduat bench` run.
type Report struct {
	Quick     bool    `json:"quick"`
	Sizes     Sizes   `json:"sizes"`
	Machine   Machine `json:"machine"`
	RSSMethod string  `json:"rss_method"`
	Rows      []Row   `json:"rows"`
}

// Machine describes where the report was measured.
type Machine struct {
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	CPUs   int    `json:"cpus"`
	Go     string `json:"go"`
}

// WriteJSON writes r as one JSON object and a newline.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return e.Encode(r)
}

// WriteTable renders r as an aligned text table followed by the notes.
func (r *Report) WriteTable(w io.Writer) error {
	// Aligned by hand: text/tabwriter cannot mix left- and right-aligned
	// columns.
	header := []string{"ROW", "FIGURE", "BASELINE", "BASELINE IS", "RATIO", "TARGET", "MET", "PEAK RSS"}
	right := []bool{false, true, true, false, true, false, false, true}
	cells := [][]string{header}
	for _, row := range r.Rows {
		cells = append(cells, rowCells(row))
	}
	widths := make([]int, len(header))
	for _, c := range cells {
		for i, s := range c {
			widths[i] = max(widths[i], len([]rune(s)))
		}
	}
	var b strings.Builder
	for _, c := range cells {
		var line strings.Builder
		for i, s := range c {
			pad := strings.Repeat(" ", widths[i]-len([]rune(s)))
			if i > 0 {
				line.WriteString("  ")
			}
			if right[i] {
				line.WriteString(pad + s)
			} else {
				line.WriteString(s + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	var notes []string
	for _, row := range r.Rows {
		if row.Note != "" {
			notes = append(notes, fmt.Sprintf("  %s: %s", row.Name, row.Note))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nNotes:\n" + strings.Join(notes, "\n") + "\n")
	}
	met := map[Met]int{}
	for _, row := range r.Rows {
		met[row.Met]++
	}
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "\nTargets: %d met, %d missed, %d n.a. (%s sizes; %s/%s, %d CPUs, %s; peak RSS by %s)\n",
		met[MetYes], met[MetNo], met[MetNA], mode, r.Machine.GOOS, r.Machine.GOARCH, r.Machine.CPUs, r.Machine.Go, r.RSSMethod)
	_, err := io.WriteString(w, b.String())
	return err
}

func rowCells(r Row) []string {
	c := []string{r.Name, r.Figure.String(), "-", "-", "-", "-", string(r.Met), "-"}
	if r.Skipped {
		c[1] = "skipped"
	}
	if r.Baseline != nil {
		c[2] = Quantity{r.Baseline.Value, r.Baseline.Unit}.String()
		c[3] = r.Baseline.What
	}
	if r.Ratio != nil {
		c[4] = formatValue(*r.Ratio) + "x"
	}
	if r.Target != nil {
		c[5] = r.Target.Text
	}
	if r.PeakRSS != nil {
		c[7] = formatValue(float64(*r.PeakRSS)/(1<<20)) + " MiB"
	}
	return c
}

// formatValue prints about three significant digits, with thousands
// separators for large values.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'f', -1, 64)
	case a >= 1000:
		return groupThousands(strconv.FormatFloat(v, 'f', 0, 64))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1 || a == 0:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Percentile returns the p-th percentile (0 < p <= 100) of xs by the
// nearest-rank method: the smallest value such that at least p% of the
// values are <= it. It returns NaN for an empty slice. xs is not modified.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 || !(p > 0 && p <= 100) {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(p * float64(len(s)) / 100))
	return s[max(k, 1)-1]
}

// Median is Percentile(xs, 50).
func Median(xs []float64) float64 { return Percentile(xs, 50) }
