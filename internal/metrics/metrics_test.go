package metrics

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testRegistry has one family of each kind, with label values that need
// escaping.
func testRegistry(t *testing.T) *Registry {
	r := NewRegistry()
	c, err := r.NewCounterVec("t_requests_total", "Requests by route.\nSecond line.", "route", "status")
	mustNil(t, err)
	c.WithLabelValues("/v1/x", "200").Inc()
	c.WithLabelValues("/v1/x", "200").Add(2)
	c.WithLabelValues(`a"b\c`, "404").Inc()
	c.WithLabelValues("line\nbreak", "500").Inc()
	h, err := r.NewHistogramVec("t_seconds", "Latency.", []float64{0.1, 1}, "backend")
	mustNil(t, err)
	h.WithLabelValues("native").Observe(0.05)
	h.WithLabelValues("native").Observe(0.1) // upper bounds are inclusive
	h.WithLabelValues("native").Observe(5)
	mustNil(t, r.NewGaugeFunc("t_sandboxes", "Sandboxes.", func() []Sample {
		return []Sample{{Values: []string{"running"}, Value: 2}, {Values: []string{"pooled"}, Value: 1}}
	}, "state"))
	return r
}

func TestExposition(t *testing.T) {
	r := testRegistry(t)
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP t_requests_total Requests by route.\nSecond line.
# TYPE t_requests_total counter
t_requests_total{route="/v1/x",status="200"} 3
t_requests_total{route="a\"b\\c",status="404"} 1
t_requests_total{route="line\nbreak",status="500"} 1
# HELP t_seconds Latency.
# TYPE t_seconds histogram
t_seconds_bucket{backend="native",le="0.1"} 2
t_seconds_bucket{backend="native",le="1"} 2
t_seconds_bucket{backend="native",le="+Inf"} 3
t_seconds_sum{backend="native"} 5.15
t_seconds_count{backend="native"} 3
# HELP t_sandboxes Sandboxes.
# TYPE t_sandboxes gauge
t_sandboxes{state="pooled"} 1
t_sandboxes{state="running"} 2
`
	if b.String() != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", b.String(), want)
	}
}

// The output is what the reference parser (the Prometheus server's) reads,
// with the same values, labels and types.
func TestReferenceParser(t *testing.T) {
	r := testRegistry(t)
	mustNil(t, r.RegisterRuntime())
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(&b)
	if err != nil {
		t.Fatalf("the reference parser refuses the exposition: %v\n%s", err, b.String())
	}
	c := fams["t_requests_total"]
	if c == nil || c.GetType().String() != "COUNTER" || c.GetHelp() != "Requests by route.\nSecond line." || len(c.Metric) != 3 {
		t.Fatalf("counter family: %v", c)
	}
	got := map[string]float64{}
	for _, m := range c.Metric {
		got[m.Label[0].GetValue()+"|"+m.Label[1].GetValue()] = m.GetCounter().GetValue()
	}
	for k, v := range map[string]float64{"/v1/x|200": 3, `a"b\c|404`: 1, "line\nbreak|500": 1} {
		if got[k] != v {
			t.Errorf("counter %q = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	h := fams["t_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 5.15 || len(h.Bucket) != 3 || h.Bucket[0].GetCumulativeCount() != 2 || h.Bucket[2].GetCumulativeCount() != 3 {
		t.Errorf("histogram: %v", h)
	}
	if g := fams["t_sandboxes"]; g.GetType().String() != "GAUGE" || len(g.Metric) != 2 {
		t.Errorf("gauge: %v", g)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes"} {
		if f := fams[name]; f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() <= 0 {
			t.Errorf("runtime gauge %s: %v", name, f)
		}
	}
}

func TestHandlerAndRuntime(t *testing.T) {
	r := NewRegistry()
	mustNil(t, r.RegisterRuntime())
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	if !strings.Contains(rec.Body.String(), "\ngo_goroutines ") {
		t.Errorf("no go_goroutines in %q", rec.Body.String())
	}
}

// Registration refuses what the format cannot carry.
func TestRegistrationErrors(t *testing.T) {
	r := NewRegistry()
	_, err := r.NewCounterVec("ok_total", "x", "a")
	mustNil(t, err)
	for what, err := range map[string]error{
		"duplicate":   second(r.NewCounterVec("ok_total", "x")),
		"bad name":    second(r.NewCounterVec("bad-name", "x")),
		"bad label":   second(r.NewCounterVec("x_total", "x", "a-b")),
		"reserved":    second(r.NewCounterVec("y_total", "x", "__a")),
		"label twice": second(r.NewCounterVec("z_total", "x", "a", "a")),
		"le":          second(r.NewHistogramVec("h", "x", []float64{1}, "le")),
		"buckets":     second(r.NewHistogramVec("h2", "x", []float64{2, 1})),
		"gauge name":  r.NewGaugeFunc("1x", "x", func() []Sample { return nil }),
	} {
		if err == nil {
			t.Errorf("%s: no error", what)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// A gauge function that returns the wrong label values makes the scrape
// fail with an error naming it; it never panics while writing.
func TestGaugeLabelMismatchIsAnError(t *testing.T) {
	r := NewRegistry()
	mustNil(t, r.NewGaugeFunc("g", "x", func() []Sample {
		return []Sample{{Values: []string{"a"}, Value: 1}, {Values: nil, Value: 2}}
	}, "k"))
	var b bytes.Buffer
	_, err := r.WriteTo(&b)
	if err == nil || !strings.Contains(err.Error(), "g wants 1 label values") {
		t.Fatalf("WriteTo: %v", err)
	}
	if !strings.Contains(b.String(), `g{k="a"} 1`) {
		t.Errorf("the good sample is missing: %q", b.String())
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "label values") {
		t.Errorf("scrape: %d %q", rec.Code, rec.Body.String())
	}
	c, _ := r.NewCounterVec("c_total", "x", "a")
	if _, err := c.GetWithLabelValues(); err == nil {
		t.Errorf("GetWithLabelValues with a missing value: %v", err)
	}
}
