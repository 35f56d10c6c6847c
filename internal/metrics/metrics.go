// Package metrics is a small Prometheus text-format (0.0.4) exposition:
// counter and histogram vectors with labels, gauges computed at scrape time,
// and a registry that writes them. It exists because the official client's
// package initialisation (protobuf descriptors, default collectors) costs
// milliseconds on every start of the airlock binary, which is also the
// sandbox init; see docs/RATIONALE.md. It must never grow beyond what the
// server exposes: no push, no protobuf, no global registry.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Registry holds metrics in registration order.
type Registry struct {
	mu      sync.Mutex
	metrics []collector
}

type collector interface {
	write(w *bufio.Writer)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

func (r *Registry) add(c collector) {
	r.mu.Lock()
	r.metrics = append(r.metrics, c)
	r.mu.Unlock()
}

// WriteTo writes every metric in the text exposition format.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	ms := append([]collector(nil), r.metrics...)
	r.mu.Unlock()
	cw := &countWriter{w: w}
	bw := bufio.NewWriter(cw)
	for _, m := range ms {
		m.write(bw)
	}
	err := bw.Flush()
	return cw.n, err
}

// Handler serves the registry at a scrape endpoint.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = r.WriteTo(w)
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

func (d *desc) check(values []string) {
	if len(values) != len(d.labels) {
		panic(fmt.Sprintf("metrics: %s wants %d label values, got %d", d.name, len(d.labels), len(values)))
	}
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
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	c := &CounterVec{d: desc{name: name, help: help, typ: "counter", labels: labels}, series: map[string]*Counter{}, values: map[string][]string{}}
	r.add(c)
	return c
}

// WithLabelValues returns the series for values, creating it at zero.
func (c *CounterVec) WithLabelValues(values ...string) *Counter {
	c.d.check(values)
	k := key(values)
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.series[k]
	if !ok {
		s = &Counter{}
		c.series[k] = s
		c.values[k] = append([]string(nil), values...)
	}
	return s
}

func (c *CounterVec) write(w *bufio.Writer) {
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
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	if !sort.Float64sAreSorted(buckets) {
		panic("metrics: buckets not sorted: " + name)
	}
	h := &HistogramVec{d: desc{name: name, help: help, typ: "histogram", labels: labels}, buckets: buckets, series: map[string]*Histogram{}, values: map[string][]string{}}
	r.add(h)
	return h
}

// WithLabelValues returns the series for values, creating it empty.
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram {
	h.d.check(values)
	k := key(values)
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.series[k]
	if !ok {
		s = &Histogram{upper: h.buckets, counts: make([]uint64, len(h.buckets))}
		h.series[k] = s
		h.values[k] = append([]string(nil), values...)
	}
	return s
}

func (h *HistogramVec) write(w *bufio.Writer) {
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

// NewGaugeFunc registers a gauge family computed at scrape time.
func (r *Registry) NewGaugeFunc(name, help string, fn func() []Sample, labels ...string) {
	r.add(&gaugeFunc{d: desc{name: name, help: help, typ: "gauge", labels: labels}, fn: fn})
}

func (g *gaugeFunc) write(w *bufio.Writer) {
	samples := g.fn()
	sort.Slice(samples, func(i, j int) bool { return key(samples[i].Values) < key(samples[j].Values) })
	g.d.header(w)
	for _, s := range samples {
		g.d.check(s.Values)
		fmt.Fprintf(w, "%s%s %s\n", g.d.name, g.d.labelText(s.Values), formatFloat(s.Value))
	}
}

// RegisterRuntime adds the Go runtime gauges operators expect
// (goroutines, heap, GC count).
func (r *Registry) RegisterRuntime() {
	r.NewGaugeFunc("go_goroutines", "Number of goroutines that currently exist.", func() []Sample {
		return []Sample{{Value: float64(runtime.NumGoroutine())}}
	})
	r.NewGaugeFunc("go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects.", func() []Sample {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return []Sample{{Value: float64(ms.HeapAlloc)}}
	})
}
