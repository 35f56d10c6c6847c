package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/server/store"
)

// tlsServer is a test server's API served over TLS (ServeTLS), as
// `airlock serve --listen --tls-cert` does.
type tlsServer struct {
	*testServer
	addr string
	pool *x509.CertPool
}

func newTLSServer(t *testing.T, mod func(*Config)) *tlsServer {
	t.Helper()
	ts := newTestServer(t, mod)
	cfg, pool := testTLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ts.srv.ServeTLS(ln, cfg)
	return &tlsServer{testServer: ts, addr: ln.Addr().String(), pool: pool}
}

// testTLS is a server configuration with a fresh certificate for
// 127.0.0.1, and the pool that trusts it.
func testTLS(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, pool
}

// key stores a fresh API key of tenant.
func (ts *tlsServer) key(t *testing.T, tenant string) string {
	t.Helper()
	key := store.KeyPrefix + tenant + "-" + newID("")
	if _, err := ts.store.AddKey(context.Background(), tenant, "test", key); err != nil {
		t.Fatal(err)
	}
	return key
}

// httpClient speaks HTTP/2 only or HTTP/1.1 only to ts.
func (ts *tlsServer) httpClient(t *testing.T, h2 bool) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(!h2)
	p.SetHTTP2(h2)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ts.pool}, Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func (ts *tlsServer) get(t *testing.T, hc *http.Client, key, path string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://"+ts.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// inflightOf is how many requests tenant has running.
func (ts *tlsServer) inflightOf(tenant string) int {
	f := &ts.srv.inflight
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[tenant]
}

// TestTLSNegotiatesH2AndH1: the TLS listener speaks HTTP/2 to a client
// that offers it by ALPN and HTTP/1.1 to one that does not; a WebSocket
// (the PTY, port apps) still goes over HTTP/1.1 with a client that
// would take HTTP/2; a connection over the per-network limit gets its
// JSON refusal over TLS.
func TestTLSNegotiatesH2AndH1(t *testing.T) {
	t.Parallel()
	ts := newTLSServer(t, nil)
	key := ts.key(t, "alice")
	for _, h2 := range []bool{true, false} {
		resp, body := ts.get(t, ts.httpClient(t, h2), key, "/v1/sandboxes")
		want := map[bool]string{true: "HTTP/2.0", false: "HTTP/1.1"}[h2]
		if resp.StatusCode != 200 || resp.Proto != want {
			t.Errorf("h2=%v: %s %s %s, want 200 over %s", h2, resp.Proto, resp.Status, body, want)
		}
	}
	c, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: ts.pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Errorf("ALPN offering h2 and http/1.1 chose %q, want h2", p)
	}
	c.Close()

	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ts.pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+ts.addr+"/v1/sandboxes/sb-none/pty", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Proto != "HTTP/1.1" || resp.StatusCode != http.StatusNotFound {
		t.Errorf("WebSocket upgrade: %s %s, want 404 (no such sandbox) over HTTP/1.1", resp.Proto, resp.Status)
	}

	// Three connections held, the fourth is refused in words, over TLS.
	ts = newTLSServer(t, func(c *Config) { c.TCPLimits = ConnLimits{PerPrefix: 3, PerTenant: 256, Total: 4096} })
	for range 3 {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	eventually(t, "three connections counted", func() bool {
		resp, err := ts.httpClient(t, false).Get("https://" + ts.addr + "/v1/health")
		if err != nil {
			return true // already refused: the three are held
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusTooManyRequests
	})
	resp, err = ts.httpClient(t, false).Get("https://" + ts.addr + "/v1/health")
	if err != nil {
		t.Fatalf("over the per-network limit: %v, want a 429 answer over TLS", err)
	}
	var eb api.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || eb.Error.Code != api.CodeLimitExceeded {
		t.Errorf("over the per-network limit: %s %+v, want 429 limit_exceeded", resp.Status, eb)
	}
}

// h2Conn is a raw HTTP/2 client connection: the test writes the frames
// an attacker would; a goroutine reads the server's.
type h2Conn struct {
	t      *testing.T
	c      *tls.Conn
	fr     *http2.Framer
	hbuf   bytes.Buffer
	enc    *hpack.Encoder
	key    string
	frames chan h2Frame

	maxStreams uint32 // the server's SETTINGS_MAX_CONCURRENT_STREAMS
}

// h2Frame is what the test needs of a frame the server sent.
type h2Frame struct {
	typ    http2.FrameType
	stream uint32
	code   http2.ErrCode // RST_STREAM, GOAWAY
	status string        // HEADERS
	end    bool          // END_STREAM
}

func dialH2(t *testing.T, ts *tlsServer, key string) *h2Conn {
	t.Helper()
	c, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: ts.pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, want h2", p)
	}
	h := &h2Conn{t: t, c: c, fr: http2.NewFramer(c, c), key: key, frames: make(chan h2Frame, 1<<16)}
	h.enc = hpack.NewEncoder(&h.hbuf)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for h.maxStreams == 0 {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("read the server's settings: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			v, ok := sf.Value(http2.SettingMaxConcurrentStreams)
			if !ok {
				v = 1 << 31 // unlimited
			}
			h.maxStreams = v
		}
	}
	if err := h.fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	go h.read()
	return h
}

func (h *h2Conn) read() {
	defer close(h.frames)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		hf := h2Frame{typ: f.Header().Type, stream: f.Header().StreamID, end: f.Header().Flags.Has(http2.FlagDataEndStream)}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			hf.code = f.ErrCode
		case *http2.GoAwayFrame:
			hf.code = f.ErrCode
		case *http2.MetaHeadersFrame:
			hf.status = f.PseudoValue("status")
			hf.end = f.StreamEnded()
		}
		select {
		case h.frames <- hf:
		default: // the test reads what it needs; the rest is dropped
		}
	}
}

// open starts a request on stream id: POST /v1/sandboxes whose body
// never comes unless the test sends it, so its handler waits in the read.
func (h *h2Conn) open(id uint32) error {
	h.hbuf.Reset()
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", h.c.RemoteAddr().String()},
		{":path", "/v1/sandboxes"}, {"authorization", "Bearer " + h.key}, {"content-type", "application/json"}} {
		h.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(), EndHeaders: true})
}

// next is the next frame of the server that match says is awaited.
func (h *h2Conn) next(what string, match func(h2Frame) bool) h2Frame {
	h.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case f, ok := <-h.frames:
			if !ok {
				h.t.Fatalf("%s: the connection ended first", what)
			}
			if match(f) {
				return f
			}
		case <-timeout:
			h.t.Fatalf("%s: not within 20 s", what)
		}
	}
}

// TestH2StreamsPerConnectionBounded: a client opening 40 streams at once
// on one connection has 32 served; the server resets the other 8, never
// runs more than 32 of its requests, and its goroutines stay bounded.
func TestH2StreamsPerConnectionBounded(t *testing.T) {
	t.Parallel()
	ts := newTLSServer(t, func(c *Config) { c.IOTimeout = time.Minute })
	h := dialH2(t, ts, ts.key(t, "mallory"))
	if h.maxStreams != h2MaxStreams {
		t.Errorf("server advertises %d concurrent streams, want %d", h.maxStreams, h2MaxStreams)
	}
	base := runtime.NumGoroutine()
	const streams = 40
	for i := range uint32(streams) {
		if err := h.open(2*i + 1); err != nil {
			t.Fatal(err)
		}
	}
	reset := map[uint32]bool{}
	for len(reset) < streams-h2MaxStreams {
		f := h.next(strconv.Itoa(streams-h2MaxStreams)+" streams reset", func(f h2Frame) bool { return f.typ == http2.FrameRSTStream })
		reset[f.stream] = true
	}
	eventually(t, "32 requests running", func() bool { return ts.inflightOf("mallory") == h2MaxStreams })
	grown := runtime.NumGoroutine() - base
	for id := range reset {
		if id < 2*h2MaxStreams+1 {
			t.Errorf("stream %d reset: the first %d should run", id, h2MaxStreams)
		}
	}
	if peak := ts.srv.inflight.maxPeak(); peak > h2MaxStreams {
		t.Errorf("%d requests of one connection ran at once, want at most %d", peak, h2MaxStreams)
	}
	if grown > 4*h2MaxStreams {
		t.Errorf("the server grew by %d goroutines for one connection's %d streams", grown, streams)
	}
	t.Logf("%d streams: %d reset, %d running, goroutines +%d", streams, len(reset), ts.inflightOf("mallory"), grown)
}

// TestH2RapidResetBounded: a client opening streams and resetting them
// at once (CVE-2023-44487), 20,000 times on one connection, never has
// more than 32 requests running nor grows the server's goroutines beyond
// a bound; the server may end the connection (ENHANCE_YOUR_CALM). Another
// tenant is served meanwhile and after.
func TestH2RapidResetBounded(t *testing.T) {
	t.Parallel()
	ts := newTLSServer(t, func(c *Config) { c.IOTimeout = time.Minute; c.TenantRequests = -1 })
	h := dialH2(t, ts, ts.key(t, "mallory"))
	bob := ts.key(t, "bob")
	base := runtime.NumGoroutine()
	var peakG int
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			g := runtime.NumGoroutine()
			mu.Lock()
			peakG = max(peakG, g)
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	const n = 20000
	sent := 0
	for i := range uint32(n) {
		id := 2*i + 1
		if h.open(id) != nil || h.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the server ended the connection
		}
		sent++
	}
	close(done)
	resp, body := ts.get(t, ts.httpClient(t, true), bob, "/v1/sandboxes")
	if resp.StatusCode != 200 {
		t.Errorf("another tenant after the attack: %s %s", resp.Status, body)
	}
	mu.Lock()
	grown := peakG - base
	mu.Unlock()
	peak := ts.srv.inflight.maxPeak()
	if peak > h2MaxStreams || grown > 8*h2MaxStreams {
		t.Errorf("rapid reset: %d requests ran at once (want ≤ %d), goroutines +%d", peak, h2MaxStreams, grown)
	}
	t.Logf("rapid reset: %d of %d HEADERS+RST_STREAM sent; peak %d requests running, goroutines +%d", sent, n, peak, grown)
}

// TestTLSSlowClientsCut: over TLS, a client that never finishes its
// handshake loses its connection after the head deadline, and an HTTP/2
// stream whose body stops coming is ended by the I/O deadline, its
// request no longer counted.
func TestTLSSlowClientsCut(t *testing.T) {
	t.Parallel()
	ts := newTLSServer(t, func(c *Config) { c.HeadTimeout = 300 * time.Millisecond; c.IOTimeout = 300 * time.Millisecond })
	raw, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte{0x16, 0x03, 0x01}) // the start of a ClientHello, no more
	raw.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, raw); err != nil {
		t.Errorf("stalled handshake: %v, want the server to close it", err)
	}

	h := dialH2(t, ts, ts.key(t, "mallory"))
	if err := h.open(1); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteData(1, false, []byte("{")); err != nil {
		t.Fatal(err)
	}
	f := h.next("the slow stream ended", func(f h2Frame) bool {
		return f.stream == 1 && (f.typ == http2.FrameRSTStream || f.end) || f.typ == http2.FrameGoAway
	})
	eventually(t, "the slow request no longer counted", func() bool { return ts.inflightOf("mallory") == 0 })
	t.Logf("slow body: %v (status %q, code %v)", f.typ, f.status, f.code)
}

// TestTenantRequestsCapped: a tenant with its cap of requests running
// (here 8 streams of one HTTP/2 connection) gets 429 limit_exceeded for
// the next, and another tenant is served.
func TestTenantRequestsCapped(t *testing.T) {
	t.Parallel()
	ts := newTLSServer(t, func(c *Config) { c.IOTimeout = time.Minute; c.TenantRequests = 8 })
	mal := ts.key(t, "mallory")
	h := dialH2(t, ts, mal)
	for i := range uint32(8) {
		if err := h.open(2*i + 1); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "8 requests of mallory running", func() bool { return ts.inflightOf("mallory") == 8 })
	resp, body := ts.get(t, ts.httpClient(t, true), mal, "/v1/sandboxes")
	var eb api.ErrorBody
	json.Unmarshal(body, &eb)
	if resp.StatusCode != http.StatusTooManyRequests || eb.Error.Code != api.CodeLimitExceeded {
		t.Errorf("mallory's 9th request: %s %s, want 429 limit_exceeded", resp.Status, body)
	}
	for _, h2 := range []bool{true, false} {
		resp, body := ts.get(t, ts.httpClient(t, h2), ts.key(t, "bob"), "/v1/sandboxes")
		if resp.StatusCode != 200 {
			t.Errorf("bob (h2=%v) while mallory is at her cap: %s %s", h2, resp.Status, body)
		}
	}
}

// TestTLSStalledRefusalDoesNotBlockAccept: a connection over its
// network's limit that never sends a ClientHello does not stop the
// listener from serving another network's client.
func TestTLSStalledRefusalDoesNotBlockAccept(t *testing.T) {
	t.Parallel()
	ts := newTLSServer(t, func(c *Config) { c.TCPLimits = ConnLimits{PerPrefix: 1, PerTenant: 256, Total: 4096} })
	for range 2 { // the first is held, the second refused: both silent
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(100 * time.Millisecond) // both accepted (no assertion rests on it)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, 1)}}
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: ts.pool}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	req, _ := http.NewRequest("GET", "https://"+ts.addr+"/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+ts.key(t, "bob"))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("another network's client while a refused connection is silent: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("another network's client: %s", resp.Status)
	}
}

// TestDoorTLSSpeaksH2AndH1: a door's TLS listener (the E2B adapter's,
// --e2b-tls-cert) negotiates HTTP/2 or HTTP/1.1 by ALPN as the API's does.
func TestDoorTLSSpeaksH2AndH1(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	cfg, pool := testTLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) })
	go ts.srv.ServeDoor(ln, cfg, h, func(*http.Request) string { return "" })
	door := &tlsServer{testServer: ts, addr: ln.Addr().String(), pool: pool}
	for _, h2 := range []bool{true, false} {
		resp, body := door.get(t, door.httpClient(t, h2), "none", "/health")
		want := map[bool]string{true: "HTTP/2.0", false: "HTTP/1.1"}[h2]
		if resp.StatusCode != 200 || string(body) != want {
			t.Errorf("door, h2=%v: %s %q, want 200 %q", h2, resp.Status, body, want)
		}
	}
}
