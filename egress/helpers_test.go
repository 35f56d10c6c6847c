package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/airlock-dev/airlock/internal/testutil/realserver"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
)

// recorder is an audit sink for tests.
type recorder struct {
	mu     sync.Mutex
	events []audit.Event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) Emit(e audit.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []audit.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]audit.Event(nil), r.events...)
}

// wait returns the first event matching pred, waiting for it (allowed
// connections are recorded when they close, after the client is done).
func (r *recorder) wait(t *testing.T, what string, pred func(audit.Event) bool) audit.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		for _, e := range r.all() {
			if pred(e) {
				return e
			}
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("no audit event %s; have:\n%s", what, r.dump())
		}
	}
}

func (r *recorder) dump() string {
	var b strings.Builder
	for _, e := range r.all() {
		fmt.Fprintf(&b, "  %s %s %v\n", e.Type, e.Message, e.Fields)
	}
	return b.String()
}

// egressEvent matches an egress event with the action, host and a reason
// containing reason.
func egressEvent(action, host, reason string) func(audit.Event) bool {
	return func(e audit.Event) bool {
		if e.Type != audit.TypeEgress || e.Fields["action"] != action {
			return false
		}
		if host != "" && e.Fields["host"] != host {
			return false
		}
		r, _ := e.Fields["reason"].(string)
		return strings.Contains(r, reason)
	}
}

// testCA issues server certificates for the tests' "real" servers.
type testCA = realserver.CA

func newTestCA(t testing.TB) *testCA { return realserver.NewCA(t) }

// startTLS starts a real HTTPS server on 127.0.0.1 for names.
func startTLS(t testing.TB, ca *testCA, h http.Handler, names ...string) uint16 {
	return realserver.StartTLS(t, ca, h, names...)
}

// startHTTP starts a real plain HTTP server on 127.0.0.1.
func startHTTP(t testing.TB, h http.Handler) uint16 {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return portOf(t, s.URL)
}

func portOf(t testing.TB, u string) uint16 {
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	ap, err := netip.ParseAddrPort(pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	return ap.Port()
}

var loopback = netip.MustParseAddr("127.0.0.1")

// harness runs a Proxy behind a loopback listener standing in for the
// agent's tunnel: each accepted connection is one egress stream.
type harness struct {
	p     *Proxy
	rec   *recorder
	addr  string
	mu    sync.Mutex
	dials []netip.AddrPort
}

// newHarness starts a proxy. port443, when set, is where dials to port 443
// really go (tests cannot listen on 443); every dial is recorded.
func newHarness(t testing.TB, cfg Config, port443 uint16) *harness {
	t.Helper()
	h := &harness{rec: newRecorder()}
	cfg.Audit = h.rec
	if cfg.SandboxID == "" {
		cfg.SandboxID = "sb-test"
	}
	cfg.Dial = func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
		h.mu.Lock()
		h.dials = append(h.dials, ap)
		h.mu.Unlock()
		if !ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("test refuses to dial %v", ap)
		}
		if ap.Port() == 443 && port443 != 0 {
			ap = netip.AddrPortFrom(ap.Addr(), port443)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, ap.String())
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.ServeEgress(ctx, cfg.SandboxID, c)
			}()
		}
	}()
	h.addr = ln.Addr().String()
	return h
}

func (h *harness) dialed() []netip.AddrPort {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]netip.AddrPort(nil), h.dials...)
}

// client is an HTTP client using the proxy (as HTTP_PROXY/HTTPS_PROXY).
func (h *harness) client(roots *x509.CertPool) *http.Client {
	pu, _ := url.Parse("http://" + h.addr)
	return &http.Client{
		Transport: &http.Transport{
			Proxy:             http.ProxyURL(pu),
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			DisableKeepAlives: true,
		},
		Timeout: 20 * time.Second,
	}
}

// raw opens a raw connection to the proxy.
func (h *harness) raw(t testing.TB) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// poolWith returns a pool of the given PEM certificates.
func poolWith(t testing.TB, pems ...[]byte) *x509.CertPool {
	p := x509.NewCertPool()
	for _, b := range pems {
		if !p.AppendCertsFromPEM(b) {
			t.Fatal("bad PEM")
		}
	}
	return p
}
