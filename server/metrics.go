package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/internal/metrics"
)

// metrics are the server's Prometheus metrics, on a registry of its own
// (never a global one, so tests and embedders can run several servers).
type serverMetrics struct {
	reg           *metrics.Registry
	createTotal   *metrics.HistogramVec // API create latency, pooled or not
	backendCreate *metrics.HistogramVec // Backend.Create alone
	exec          *metrics.HistogramVec
	lifetime      *metrics.HistogramVec
	violations    *metrics.CounterVec
	errors        *metrics.CounterVec
	requests      *metrics.CounterVec
	connRefused   *metrics.Counter
	connEvicted   *metrics.Counter
	eventsDropped *metrics.CounterVec
	h2Errors      *metrics.CounterVec
}

var latencyBuckets = []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newMetrics(s *Server) (*serverMetrics, error) {
	r := metrics.NewRegistry()
	var errs []error
	hist := func(name, help string, buckets []float64, labels ...string) *metrics.HistogramVec {
		h, err := r.NewHistogramVec(name, help, buckets, labels...)
		errs = append(errs, err)
		return h
	}
	counter := func(name, help string, labels ...string) *metrics.CounterVec {
		c, err := r.NewCounterVec(name, help, labels...)
		errs = append(errs, err)
		return c
	}
	m := &serverMetrics{
		reg:           r,
		createTotal:   hist("airlock_create_seconds", "Latency of sandbox creation through the API.", latencyBuckets, "backend", "pooled"),
		backendCreate: hist("airlock_backend_create_seconds", "Latency of Backend.Create (pool fills included).", latencyBuckets, "backend"),
		exec:          hist("airlock_exec_seconds", "Wall time of foreground execs, start to exit.", latencyBuckets, "backend"),
		lifetime: hist("airlock_sandbox_lifetime_seconds", "How long sandboxes lived.",
			[]float64{1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}, "backend"),
		violations:    counter("airlock_violations_total", "Policy violations reported by sandboxes.", "backend"),
		errors:        counter("airlock_api_errors_total", "Error answers by error code.", "code"),
		requests:      counter("airlock_api_requests_total", "API requests by route and status.", "route", "status"),
		h2Errors:      counter("airlock_http2_errors_total", "HTTP/2 protocol errors of clients (resets over the stream limit, floods, bad frames), by kind.", "type"),
		eventsDropped: counter("airlock_events_aggregated_total", "Audit events over a sandbox's rate, stored as one aggregate each second.", "type"),
	}
	m.connRefused = counter("airlock_connections_refused_total", "Connections closed at accept: over the per-network limit, or the total one with no anonymous connection to evict.").WithLabelValues()
	m.connEvicted = counter("airlock_connections_evicted_total", "Anonymous connections closed to make room for a new one at the total limit.").WithLabelValues()
	errs = append(errs,
		r.NewGaugeFunc("airlock_sandboxes", "Sandboxes held by this server, by state and backend.", s.sandboxCounts, "backend", "state"),
		r.RegisterRuntime())
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return m, nil
}

func (m *serverMetrics) handler() http.Handler { return m.reg.Handler() }

// instrument counts requests of route by status.
func (m *serverMetrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController and websocket reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sandboxCounts reports live sandboxes by state and backend at scrape time.
func (s *Server) sandboxCounts() []metrics.Sample {
	counts := map[[2]string]int{}
	s.mu.Lock()
	for name := range s.cfg.Backends {
		counts[[2]string{"running", name}] += 0
		counts[[2]string{"pooled", name}] += 0
	}
	for _, l := range s.live {
		counts[[2]string{"running", l.backend}]++
	}
	pools := make([]*pool, 0, len(s.pools))
	for _, p := range s.pools {
		pools = append(pools, p)
	}
	s.mu.Unlock()
	for _, p := range pools {
		counts[[2]string{"pooled", p.key.backend}] += p.readyCount()
	}
	out := make([]metrics.Sample, 0, len(counts))
	for k, n := range counts {
		out = append(out, metrics.Sample{Values: []string{k[1], k[0]}, Value: float64(n)})
	}
	return out
}

// metricsHandler serves /metrics: on the unix socket always, over TCP
// only when the operator asked (Config.PublicMetrics): the server's
// figures are the operator's, not a tenant's.
func (s *Server) metricsHandler() http.Handler {
	h := s.metrics.handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trusted, _ := r.Context().Value(keyTrusted).(bool)
		if !trusted && !s.cfg.PublicMetrics {
			s.writeError(w, r, &httpError{api.CodeNotFound, errBadRequest("GET /metrics: served on the unix socket only (serve --public-metrics serves it over TCP)")})
			return
		}
		h.ServeHTTP(w, r)
	})
}
