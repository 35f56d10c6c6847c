package metrics

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExposition(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("t_requests_total", "Requests by route.\nSecond line.", "route", "status")
	c.WithLabelValues("/v1/x", "200").Inc()
	c.WithLabelValues("/v1/x", "200").Add(2)
	c.WithLabelValues(`a"b\c`, "404").Inc()
	h := r.NewHistogramVec("t_seconds", "Latency.", []float64{0.1, 1}, "backend")
	h.WithLabelValues("native").Observe(0.05)
	h.WithLabelValues("native").Observe(0.1) // upper bounds are inclusive
	h.WithLabelValues("native").Observe(5)
	r.NewGaugeFunc("t_sandboxes", "Sandboxes.", func() []Sample {
		return []Sample{{Values: []string{"running"}, Value: 2}, {Values: []string{"pooled"}, Value: 1}}
	}, "state")
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP t_requests_total Requests by route.\nSecond line.
# TYPE t_requests_total counter
t_requests_total{route="/v1/x",status="200"} 3
t_requests_total{route="a\"b\\c",status="404"} 1
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

func TestHandlerAndRuntime(t *testing.T) {
	r := NewRegistry()
	r.RegisterRuntime()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	if !strings.Contains(rec.Body.String(), "\ngo_goroutines ") {
		t.Errorf("no go_goroutines in %q", rec.Body.String())
	}
}

func TestWrongLabelCountPanics(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("x_total", "x", "a")
	defer func() {
		if recover() == nil {
			t.Error("no panic for a missing label value")
		}
	}()
	c.WithLabelValues()
}
