package server

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, on a registry of its own
// (never the global one, so tests and embedders can run several servers).
type metrics struct {
	reg           *prometheus.Registry
	createTotal   *prometheus.HistogramVec // API create latency, pooled or not
	backendCreate *prometheus.HistogramVec // Backend.Create alone
	exec          *prometheus.HistogramVec
	lifetime      *prometheus.HistogramVec
	violations    *prometheus.CounterVec
	errors        *prometheus.CounterVec
	requests      *prometheus.CounterVec
}

var latencyBuckets = []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		createTotal: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_create_seconds", Help: "Latency of sandbox creation through the API.", Buckets: latencyBuckets,
		}, []string{"backend", "pooled"}),
		backendCreate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_backend_create_seconds", Help: "Latency of Backend.Create (pool fills included).", Buckets: latencyBuckets,
		}, []string{"backend"}),
		exec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_exec_seconds", Help: "Wall time of foreground execs, start to exit.", Buckets: latencyBuckets,
		}, []string{"backend"}),
		lifetime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_sandbox_lifetime_seconds", Help: "How long sandboxes lived.",
			Buckets: []float64{1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600},
		}, []string{"backend"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_violations_total", Help: "Policy violations reported by sandboxes.",
		}, []string{"backend"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_api_errors_total", Help: "Error answers by error code.",
		}, []string{"code"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_api_requests_total", Help: "API requests by route and status.",
		}, []string{"route", "status"}),
	}
	m.reg.MustRegister(m.createTotal, m.backendCreate, m.exec, m.lifetime, m.violations, m.errors, m.requests,
		sandboxCollector{s}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// instrument counts requests of route by status.
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
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

// sandboxCollector reports live sandboxes by state and backend at scrape time.
type sandboxCollector struct{ s *Server }

var sandboxesDesc = prometheus.NewDesc("airlock_sandboxes", "Sandboxes held by this server, by state and backend.", []string{"state", "backend"}, nil)

func (c sandboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sandboxesDesc }

func (c sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[[2]string]int{}
	s := c.s
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
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
