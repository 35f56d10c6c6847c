// Package metrics is a small Prometheus text-format (0.0.4) exposition:
// counter and histogram vectors with labels, gauges computed at scrape time,
// and a registry that writes them. It exists because the official client's
// package initialisation (protobuf descriptors, default collectors) costs
// milliseconds on every start of the airlock binary, which is also the
// sandbox init; see docs/RATIONALE.md. A test holds its output to the
// reference parser (github.com/prometheus/common/expfmt, a test-only
// dependency). Mistakes are errors where they are made (a bad name at
// registration, a wrong label count from a gauge function at scrape),
// never a panic while a scrape is being written. It must never grow beyond
// what the server exposes: no push, no protobuf, no global registry.
package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Registry holds metrics in registration order.
type Registry struct {
	mu      sync.Mutex
	metrics []collector
	names   map[string]bool
}

type collector interface {
	write(w *bufio.Writer) error
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

// validName reports whether s matches [a-zA-Z_:][a-zA-Z0-9_:]* (a metric
// name; colon false: [a-zA-Z_][a-zA-Z0-9_]*, a label name). No regexp: the
// binary compiles none at start-up (docs/RATIONALE.md).
func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || colon && c == ':' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// add registers c as d after checking d's names (the exposition format's
// grammar, one family per name, distinct labels, "le" only in histograms).
func (r *Registry) add(d *desc, c collector) error {
	if !validName(d.name, true) {
		return fmt.Errorf("metrics: register %q: not a valid metric name", d.name)
	}
	seen := map[string]bool{}
	for _, l := range d.labels {
		switch {
		case !validName(l, false) || strings.HasPrefix(l, "__"):
			return fmt.Errorf("metrics: register %q: %q is not a valid label name", d.name, l)
		case seen[l]:
			return fmt.Errorf("metrics: register %q: label %q twice", d.name, l)
		case l == "le" && d.typ == "histogram":
			return fmt.Errorf("metrics: register %q: label \"le\" is the histogram's own", d.name)
		}
		seen[l] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[d.name] {
		return fmt.Errorf("metrics: register %q: already registered", d.name)
	}
	r.names[d.name] = true
	r.metrics = append(r.metrics, c)
	return nil
}

// WriteTo writes every metric in the text exposition format. A gauge
// function's sample with the wrong number of label values is left out and
// reported in the error (with the writer's error, if any); the rest is
// written.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	ms := append([]collector(nil), r.metrics...)
	r.mu.Unlock()
	cw := &countWriter{w: w}
	bw := bufio.NewWriter(cw)
	var errs []error
	for _, m := range ms {
		if err := m.write(bw); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, bw.Flush())
	return cw.n, errors.Join(errs...)
}

// Handler serves the registry at a scrape endpoint. A registry that cannot
// be written whole answers 500 with why, so a broken metric shows in the
// scraper instead of as silently missing series.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b bytes.Buffer
		if _, err := r.WriteTo(&b); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(b.Bytes())
	})
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// desc is a metric family's name, help and label names.
type desc struct {
	name, help, typ string
	labels          []string
}

func (d *desc) header(w *bufio.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", d.name, escapeHelp(d.help), d.name, d.typ)
}

// key joins label values; \xff never appears in valid UTF-8 label values.
func key(values []string) string { return strings.Join(values, "\xff") }

func (d *desc) check(values []string) error {
	if len(values) != len(d.labels) {
		return fmt.Errorf("metrics: %s wants %d label values (%s), got %d", d.name, len(d.labels), strings.Join(d.labels, ", "), len(values))
	}
	return nil
}

// labelText renders {a="x",b="y"} plus extra pairs (le for buckets).
func (d *desc) labelText(values []string, extra ...string) string {
	if len(d.labels) == 0 && len(extra) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	pair := func(k, v string) {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteString(`="`)
		b.WriteString(escapeValue(v))
		b.WriteByte('"')
		n++
	}
	for i, l := range d.labels {
		pair(l, values[i])
	}
	for i := 0; i+1 < len(extra); i += 2 {
		pair(extra[i], extra[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func escapeValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// sortedKeys returns the series keys in a stable order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// CounterVec is a counter per label-value combination.
type CounterVec struct {
	d      desc
	mu     sync.Mutex
	series map[string]*Counter
	values map[string][]string
}

// Counter is one series of a CounterVec.
type Counter struct {
	mu sync.Mutex
	v  float64
}

// Inc adds one.
func (c *Counter) Inc() { c.Add(1) }

// Add adds v (must not be negative).
func (c *Counter) Add(v float64) {
	if v < 0 {
		panic("metrics: counter decreased")
	}
	c.mu.Lock()
	c.v += v
	c.mu.Unlock()
}

// NewCounterVec registers a counter vector on r.
func (r *Registry) NewCounterVec(name, help string, labels ...string) (*CounterVec, error) {
	c := &CounterVec{d: desc{name: name, help: help, typ: "counter", labels: labels}, series: map[string]*Counter{}, values: map[string][]string{}}
	if err := r.add(&c.d, c); err != nil {
		return nil, err
	}
	return c, nil
}

// GetWithLabelValues returns the series for values, creating it at zero;
// an error when their number is not the vector's.
func (c *CounterVec) GetWithLabelValues(values ...string) (*Counter, error) {
	if err := c.d.check(values); err != nil {
		return nil, err
	}
	k := key(values)
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.series[k]
	if !ok {
		s = &Counter{}
		c.series[k] = s
		c.values[k] = append([]string(nil), values...)
	}
	return s, nil
}

// WithLabelValues is GetWithLabelValues for call sites whose label count
// is fixed in the code: a wrong count panics there, where the mistake is,
// as with the reference client (never at scrape time).
func (c *CounterVec) WithLabelValues(values ...string) *Counter {
	s, err := c.GetWithLabelValues(values...)
	if err != nil {
		panic(err)
	}
	return s
}

func (c *CounterVec) write(w *bufio.Writer) error {
	c.d.header(w)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range sortedKeys(c.series) {
		s := c.series[k]
		s.mu.Lock()
		v := s.v
		s.mu.Unlock()
		fmt.Fprintf(w, "%s%s %s\n", c.d.name, c.d.labelText(c.values[k]), formatFloat(v))
	}
	return nil
}

// HistogramVec is a histogram per label-value combination.
type HistogramVec struct {
	d       desc
	buckets []float64
	mu      sync.Mutex
	series  map[string]*Histogram
	values  map[string][]string
}

// Histogram is one series of a HistogramVec.
type Histogram struct {
	mu     sync.Mutex
	upper  []float64
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v) // first bucket with upper >= v
	h.mu.Lock()
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.count++
	h.sum += v
	h.mu.Unlock()
}

// NewHistogramVec registers a histogram vector with the given upper bounds
// (sorted ascending; +Inf is implied).
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, labels ...string) (*HistogramVec, error) {
	for i, b := range buckets {
		if math.IsNaN(b) || math.IsInf(b, 0) || i > 0 && b <= buckets[i-1] {
			return nil, fmt.Errorf("metrics: register %q: buckets must be finite and strictly ascending", name)
		}
	}
	h := &HistogramVec{d: desc{name: name, help: help, typ: "histogram", labels: labels}, buckets: buckets, series: map[string]*Histogram{}, values: map[string][]string{}}
	if err := r.add(&h.d, h); err != nil {
		return nil, err
	}
	return h, nil
}

// WithLabelValues is GetWithLabelValues for call sites whose label count
// is fixed in the code (a wrong count panics there, never at scrape time).
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram {
	s, err := h.GetWithLabelValues(values...)
	if err != nil {
		panic(err)
	}
	return s
}

// GetWithLabelValues returns the series for values, creating it empty; an
// error when their number is not the vector's.
func (h *HistogramVec) GetWithLabelValues(values ...string) (*Histogram, error) {
	if err := h.d.check(values); err != nil {
		return nil, err
	}
	k := key(values)
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.series[k]
	if !ok {
		s = &Histogram{upper: h.buckets, counts: make([]uint64, len(h.buckets))}
		h.series[k] = s
		h.values[k] = append([]string(nil), values...)
	}
	return s, nil
}

func (h *HistogramVec) write(w *bufio.Writer) error {
	h.d.header(w)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range sortedKeys(h.series) {
		s, vals := h.series[k], h.values[k]
		s.mu.Lock()
		var cum uint64
		for i, ub := range s.upper {
			cum += s.counts[i]
			fmt.Fprintf(w, "%s_bucket%s %d\n", h.d.name, h.d.labelText(vals, "le", formatFloat(ub)), cum)
		}
		fmt.Fprintf(w, "%s_bucket%s %d\n", h.d.name, h.d.labelText(vals, "le", "+Inf"), s.count)
		fmt.Fprintf(w, "%s_sum%s %s\n", h.d.name, h.d.labelText(vals), formatFloat(s.sum))
		fmt.Fprintf(w, "%s_count%s %d\n", h.d.name, h.d.labelText(vals), s.count)
		s.mu.Unlock()
	}
	return nil
}

// Sample is one gauge value with its label values.
type Sample struct {
	Values []string
	Value  float64
}

type gaugeFunc struct {
	d  desc
	fn func() []Sample
}

// NewGaugeFunc registers a gauge family computed at scrape time. Samples
// fn returns with the wrong number of label values are left out of the
// scrape and reported as its error.
func (r *Registry) NewGaugeFunc(name, help string, fn func() []Sample, labels ...string) error {
	g := &gaugeFunc{d: desc{name: name, help: help, typ: "gauge", labels: labels}, fn: fn}
	return r.add(&g.d, g)
}

func (g *gaugeFunc) write(w *bufio.Writer) error {
	samples := g.fn()
	sort.Slice(samples, func(i, j int) bool { return key(samples[i].Values) < key(samples[j].Values) })
	g.d.header(w)
	var bad error
	for _, s := range samples {
		if err := g.d.check(s.Values); err != nil {
			bad = err
			continue
		}
		fmt.Fprintf(w, "%s%s %s\n", g.d.name, g.d.labelText(s.Values), formatFloat(s.Value))
	}
	return bad
}

// runtimeGauges are the Go runtime figures operators expect, read with
// runtime/metrics (ReadMemStats stops the world).
var runtimeGauges = []struct{ name, help, sample string }{
	{"go_goroutines", "Number of goroutines that currently exist.", "/sched/goroutines:goroutines"},
	{"go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects.", "/memory/classes/heap/objects:bytes"},
}

// RegisterRuntime adds the Go runtime gauges (goroutines, heap).
func (r *Registry) RegisterRuntime() error {
	var errs []error
	for _, g := range runtimeGauges {
		sample := g.sample
		errs = append(errs, r.NewGaugeFunc(g.name, g.help, func() []Sample {
			s := []metrics.Sample{{Name: sample}}
			metrics.Read(s)
			switch s[0].Value.Kind() {
			case metrics.KindUint64:
				return []Sample{{Value: float64(s[0].Value.Uint64())}}
			case metrics.KindFloat64:
				return []Sample{{Value: s[0].Value.Float64()}}
			}
			return nil // not in this Go version
		}))
	}
	return errors.Join(errs...)
}
