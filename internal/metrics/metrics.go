// Package metrics holds the server's counters, gauges and histograms and
// writes them in the Prometheus text exposition format 0.0.4 (SPECS.md
// §18.8).
//
// It replaces the Prometheus client library, whose packages (with procfs,
// protobuf, client_model, common and two YAML libraries) ran their inits in
// every command of the one binary, `amduat version` included (issue 24).
// Nothing here runs at package init: a Registry and its metrics exist only
// once a server builds them.
//
// Invariants:
//   - The exposition is deterministic in order: families sorted by name,
//     series within a family by their label values in label-name order;
//     label names are written sorted, a histogram's le last.
//   - A family name is registered once per Registry (ErrAlreadyRegistered).
//   - Names and label names match [a-zA-Z_:][a-zA-Z0-9_:]* (label names
//     without ':'); a constructor panics on any other, as on a programming
//     error.
package metrics

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrAlreadyRegistered is returned by Register when a family of the same
// name is registered already.
var ErrAlreadyRegistered error = errAlreadyRegistered{}

// errAlreadyRegistered is a constant error value, so that the package has
// no init to run (issue 24).
type errAlreadyRegistered struct{}

func (errAlreadyRegistered) Error() string { return "metrics: family already registered" }

// Type is a family's type as the exposition's # TYPE line names it.
type Type string

const (
	TypeCounter   Type = "counter"
	TypeGauge     Type = "gauge"
	TypeHistogram Type = "histogram"
)

// Label is one label of a sample.
type Label struct{ Name, Value string }

// Sample is one line of the exposition: Name is the family's name, or for
// a histogram the family's name with _bucket, _sum or _count.
type Sample struct {
	Name   string
	Labels []Label // sorted by name; a histogram bucket's le last
	Value  float64
}

// Family is a named metric with its samples, as a scrape sees it.
type Family struct {
	Name, Help string
	Type       Type
	Samples    []Sample
}

// Collector is anything a Registry can gather families from: the metrics
// of this package, and the Go runtime and process collectors.
type Collector interface {
	// names lists the families the collector produces, for registration.
	names() []string
	// collect appends the collector's current families.
	collect(fs []Family) []Family
}

// Registry is a set of collectors. Its methods are safe for concurrent use.
type Registry struct {
	mu    sync.Mutex
	names map[string]bool
	cs    []Collector
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

// Register adds c. It fails, wrapping ErrAlreadyRegistered, when one of
// c's family names is registered already; then nothing of c is added.
func (r *Registry) Register(c Collector) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range c.names() {
		if r.names[n] {
			return fmt.Errorf("%w: %s", ErrAlreadyRegistered, n)
		}
	}
	for _, n := range c.names() {
		r.names[n] = true
	}
	r.cs = append(r.cs, c)
	return nil
}

// Gather returns every family of the registered collectors, sorted by
// name, each with its samples in exposition order.
func (r *Registry) Gather() []Family {
	r.mu.Lock()
	cs := slices.Clone(r.cs)
	r.mu.Unlock()
	var fs []Family
	for _, c := range cs {
		fs = c.collect(fs)
	}
	slices.SortFunc(fs, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	return fs
}

// Opts names a metric and says what it counts.
type Opts struct{ Name, Help string }

// floatBits is a float64 updated atomically.
type floatBits struct{ bits atomic.Uint64 }

func (f *floatBits) add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (f *floatBits) load() float64 { return math.Float64frombits(f.bits.Load()) }

// Counter is a value that only goes up.
type Counter struct {
	opts Opts
	v    floatBits
}

// NewCounter returns a counter without labels.
func NewCounter(o Opts) *Counter {
	mustName(o.Name)
	return &Counter{opts: o}
}

// Inc adds one.
func (c *Counter) Inc() { c.v.add(1) }

// Add adds v; a negative or NaN v is ignored (a counter never goes down).
func (c *Counter) Add(v float64) {
	if v > 0 {
		c.v.add(v)
	}
}

// Value returns the counter's value.
func (c *Counter) Value() float64 { return c.v.load() }

func (c *Counter) names() []string { return []string{c.opts.Name} }

func (c *Counter) collect(fs []Family) []Family {
	return append(fs, Family{Name: c.opts.Name, Help: c.opts.Help, Type: TypeCounter,
		Samples: []Sample{{Name: c.opts.Name, Value: c.Value()}}})
}

// Gauge is a value that goes up and down.
type Gauge struct {
	opts Opts
	v    atomic.Uint64 // float64 bits
}

// NewGauge returns a gauge without labels.
func NewGauge(o Opts) *Gauge {
	mustName(o.Name)
	return &Gauge{opts: o}
}

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.v.Store(math.Float64bits(v)) }

// Value returns the gauge's value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.v.Load()) }

func (g *Gauge) names() []string { return []string{g.opts.Name} }

func (g *Gauge) collect(fs []Family) []Family {
	return append(fs, Family{Name: g.opts.Name, Help: g.opts.Help, Type: TypeGauge,
		Samples: []Sample{{Name: g.opts.Name, Value: g.Value()}}})
}

// GaugeFunc is a gauge whose value f returns at each scrape.
type GaugeFunc struct {
	opts Opts
	f    func() float64
}

// NewGaugeFunc returns a gauge read from f at each scrape; f must be safe
// for concurrent use.
func NewGaugeFunc(o Opts, f func() float64) *GaugeFunc {
	mustName(o.Name)
	return &GaugeFunc{opts: o, f: f}
}

func (g *GaugeFunc) names() []string { return []string{g.opts.Name} }

func (g *GaugeFunc) collect(fs []Family) []Family {
	return append(fs, Family{Name: g.opts.Name, Help: g.opts.Help, Type: TypeGauge,
		Samples: []Sample{{Name: g.opts.Name, Value: g.f()}}})
}

// Histogram counts observations in cumulative buckets, with their sum and
// count.
type Histogram struct {
	opts   Opts
	bounds []float64 // ascending upper bounds, +Inf excluded
	mu     sync.Mutex
	counts []uint64 // per bucket (not cumulative); the last is +Inf
	sum    float64
	n      uint64
}

// NewHistogram returns a histogram without labels over the given upper
// bounds, which must ascend strictly (the +Inf bucket is implied).
func NewHistogram(o Opts, buckets []float64) *Histogram {
	mustName(o.Name)
	mustBuckets(buckets)
	return newHistogram(o, buckets)
}

func newHistogram(o Opts, buckets []float64) *Histogram {
	return &Histogram{opts: o, bounds: buckets, counts: make([]uint64, len(buckets)+1)}
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v) // first bound >= v
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.n++
	h.mu.Unlock()
}

func (h *Histogram) names() []string { return []string{h.opts.Name} }

func (h *Histogram) collect(fs []Family) []Family {
	f := Family{Name: h.opts.Name, Help: h.opts.Help, Type: TypeHistogram}
	f.Samples = h.appendSamples(nil, nil)
	return append(fs, f)
}

// appendSamples appends the histogram's bucket, sum and count samples,
// each with labels ls (and le for the buckets).
func (h *Histogram) appendSamples(ss []Sample, ls []Label) []Sample {
	h.mu.Lock()
	counts := slices.Clone(h.counts)
	sum, n := h.sum, h.n
	h.mu.Unlock()
	var cum uint64
	for i, c := range counts {
		cum += c
		le := math.Inf(1)
		if i < len(h.bounds) {
			le = h.bounds[i]
		}
		bl := append(slices.Clone(ls), Label{"le", formatValue(le)})
		ss = append(ss, Sample{Name: h.opts.Name + "_bucket", Labels: bl, Value: float64(cum)})
	}
	return append(ss, Sample{Name: h.opts.Name + "_sum", Labels: ls, Value: sum},
		Sample{Name: h.opts.Name + "_count", Labels: ls, Value: float64(n)})
}

// ExponentialBuckets returns n upper bounds start, start·factor,
// start·factor², …
func ExponentialBuckets(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// vec is a family of series of one kind keyed by label values.
type vec[T any] struct {
	opts   Opts
	labels []string // as declared
	order  []int    // label indexes in name order
	mk     func() T
	mu     sync.RWMutex
	series map[string]*series[T]
}

type series[T any] struct {
	labels []Label // sorted by name
	m      T
}

func newVec[T any](o Opts, labels []string, mk func() T) *vec[T] {
	mustName(o.Name)
	order := make([]int, len(labels))
	for i, l := range labels {
		mustLabel(l)
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	for i := 1; i < len(order); i++ {
		if labels[order[i]] == labels[order[i-1]] {
			panic(fmt.Sprintf("metrics: %s: label %q twice", o.Name, labels[order[i]]))
		}
	}
	return &vec[T]{opts: o, labels: labels, order: order, mk: mk, series: map[string]*series[T]{}}
}

// with returns the series of the label values vs, in declared order,
// creating it on first use.
func (v *vec[T]) with(vs []string) T {
	if len(vs) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s: %d label values for %d labels", v.opts.Name, len(vs), len(v.labels)))
	}
	key := strings.Join(vs, "\xff")
	v.mu.RLock()
	s, ok := v.series[key]
	v.mu.RUnlock()
	if ok {
		return s.m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.series[key]; ok {
		return s.m
	}
	ls := make([]Label, len(vs))
	for i, j := range v.order {
		ls[i] = Label{v.labels[j], vs[j]}
	}
	s = &series[T]{labels: ls, m: v.mk()}
	v.series[key] = s
	return s.m
}

// sorted returns the series in exposition order: by label values in
// label-name order.
func (v *vec[T]) sorted() []*series[T] {
	v.mu.RLock()
	ss := make([]*series[T], 0, len(v.series))
	for _, s := range v.series {
		ss = append(ss, s)
	}
	v.mu.RUnlock()
	slices.SortFunc(ss, func(a, b *series[T]) int {
		for i := range a.labels {
			if c := strings.Compare(a.labels[i].Value, b.labels[i].Value); c != 0 {
				return c
			}
		}
		return 0
	})
	return ss
}

// CounterVec is a counter family with labels.
type CounterVec struct{ v *vec[*Counter] }

// NewCounterVec returns a counter family with the given label names.
func NewCounterVec(o Opts, labels []string) *CounterVec {
	return &CounterVec{newVec(o, labels, func() *Counter { return &Counter{opts: o} })}
}

// WithLabelValues returns the counter of the label values, given in the
// order the labels were declared.
func (c *CounterVec) WithLabelValues(vs ...string) *Counter { return c.v.with(vs) }

func (c *CounterVec) names() []string { return []string{c.v.opts.Name} }

func (c *CounterVec) collect(fs []Family) []Family {
	f := Family{Name: c.v.opts.Name, Help: c.v.opts.Help, Type: TypeCounter}
	for _, s := range c.v.sorted() {
		f.Samples = append(f.Samples, Sample{Name: f.Name, Labels: s.labels, Value: s.m.Value()})
	}
	return append(fs, f)
}

// HistogramVec is a histogram family with labels.
type HistogramVec struct{ v *vec[*Histogram] }

// NewHistogramVec returns a histogram family over the given upper bounds
// with the given label names (none of them le).
func NewHistogramVec(o Opts, buckets []float64, labels []string) *HistogramVec {
	mustBuckets(buckets)
	if slices.Contains(labels, "le") {
		panic(fmt.Sprintf("metrics: %s: a histogram's label cannot be le", o.Name))
	}
	return &HistogramVec{newVec(o, labels, func() *Histogram { return newHistogram(o, buckets) })}
}

// WithLabelValues returns the histogram of the label values, given in the
// order the labels were declared.
func (h *HistogramVec) WithLabelValues(vs ...string) *Histogram { return h.v.with(vs) }

func (h *HistogramVec) names() []string { return []string{h.v.opts.Name} }

func (h *HistogramVec) collect(fs []Family) []Family {
	f := Family{Name: h.v.opts.Name, Help: h.v.opts.Help, Type: TypeHistogram}
	for _, s := range h.v.sorted() {
		f.Samples = s.m.appendSamples(f.Samples, s.labels)
	}
	return append(fs, f)
}

func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		ok := c == '_' || (colon && c == ':') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || (i > 0 && '0' <= c && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

func mustName(n string) {
	if !validName(n, true) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", n))
	}
}

func mustLabel(n string) {
	if !validName(n, false) || strings.HasPrefix(n, "__") {
		panic(fmt.Sprintf("metrics: invalid label name %q", n))
	}
}

func mustBuckets(b []float64) {
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 1) || (i > 0 && v <= b[i-1]) {
			panic(fmt.Sprintf("metrics: bucket bounds must ascend strictly and be finite: %v", b))
		}
	}
}
