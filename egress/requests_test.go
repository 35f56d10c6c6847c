package egress

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

func rulesHarness(t *testing.T, n policy.Network) (*harness, *http.Client, *seen) {
	t.Helper()
	ca := newTestCA(t)
	srv := &seen{}
	port := startTLS(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		srv.handler(w, r)
	}), "api.test", "free.test")
	h := newHarness(t, Config{Network: n, RootCAs: ca.Pool,
		Resolver: StaticResolver{"api.test": {loopback}, "free.test": {loopback}}}, port)
	return h, h.client(poolWith(t, h.p.CAPEM(), pemOf(ca))), srv
}

func status(t *testing.T, c *http.Client, method, u string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(""))
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRequestRules(t *testing.T) {
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"free.test", "127.0.0.1/32:443"},
		Requests: []policy.RequestRule{
			{Host: "api.test", Methods: []string{"POST"}, Path: "/repos/acme/*/pulls"},
			{Host: "api.test", Methods: []string{"GET"}, Path: "/private/**", Action: "deny"},
			{Host: "api.test", Methods: []string{"GET", "HEAD"}, Path: "/**"},
			{Host: "api.test", Methods: []string{"PUT"}, Path: "/q", Query: map[string]string{"service": "git-*"}, Headers: map[string]string{"X-Kind": "ok"}},
		}}
	h, c, _ := rulesHarness(t, n)
	for _, tc := range []struct {
		method, url string
		want        int
	}{
		{"GET", "https://api.test/anything/at/all", 200},
		{"HEAD", "https://api.test/", 200},
		{"POST", "https://api.test/repos/acme/tool/pulls", 200},
		{"POST", "https://api.test/repos/evil/tool/pulls", 403},
		{"POST", "https://api.test/repos/acme/tool/x/pulls", 403},
		{"DELETE", "https://api.test/x", 403},
		{"GET", "https://api.test/private/key", 403},
		{"PUT", "https://api.test/q?service=git-upload-pack", 403}, // header missing
		{"POST", "https://free.test/anything", 200},                // no rules: a tunnel
	} {
		if got, body := status(t, c, tc.method, tc.url); got != tc.want {
			t.Errorf("%s %s: %d %q, want %d", tc.method, tc.url, got, body, tc.want)
		}
	}
	req, _ := http.NewRequest("PUT", "https://api.test/q?service=git-upload-pack", nil)
	req.Header.Set("X-Kind", "ok")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("PUT with header: %v %v", resp, err)
	}
	_, body := status(t, c, "DELETE", "https://api.test/x")
	if !strings.Contains(body, "no request rule for api.test matches") || !strings.Contains(body, "--allow-request 'DELETE api.test/x'") {
		t.Errorf("403 body %q", body)
	}
	ev := h.rec.wait(t, "request deny event", func(e audit.Event) bool {
		return e.Fields["request"] == true && e.Fields["action"] == "deny" && e.Fields["method"] == "POST" && e.Fields["path"] == "/repos/evil/tool/pulls"
	})
	if ev.Fields["host"] != "api.test" {
		t.Errorf("event %v", ev.Fields)
	}
	h.rec.wait(t, "request allow event with rule", func(e audit.Event) bool {
		return e.Fields["request"] == true && e.Fields["action"] == "allow" && e.Fields["rule"] == "POST api.test/repos/acme/*/pulls"
	})
	// free.test was not intercepted: the sandbox CA cannot even name it.
	for _, e := range h.rec.all() {
		if e.Fields["host"] == "free.test" && e.Fields["tls_intercepted"] == true {
			t.Errorf("free.test intercepted: %v", e.Fields)
		}
	}
}

// rawTLS opens CONNECT api.test:443 through the proxy and TLS with the
// sandbox CA, for requests net/http would never write.
func rawTLS(t *testing.T, h *harness, roots []byte) *tls.Conn {
	t.Helper()
	c := h.raw(t)
	fmt.Fprintf(c, "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: poolWith(t, roots), NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestRequestRulesRefuseTricks(t *testing.T) {
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"}, Requests: []policy.RequestRule{
		{Host: "api.test", Methods: []string{"GET"}, Path: "/public/**"},
	}}
	h, _, _ := rulesHarness(t, n)
	for _, tc := range []struct{ req, want string }{
		{"GET /public/x HTTP/1.1\r\nHost: api.test\r\n\r\n", "200"},
		{"GET /public/%2e%2e/private HTTP/1.1\r\nHost: api.test\r\n\r\n", "encoded %2e"},
		{"GET /public/../private HTTP/1.1\r\nHost: api.test\r\n\r\n", ". or .. segment"},
		{"GET /public//x HTTP/1.1\r\nHost: api.test\r\n\r\n", "empty"},
		{"GET /public;x/../../private HTTP/1.1\r\nHost: api.test\r\n\r\n", "contains ;"},
		{"GET /public%2fx HTTP/1.1\r\nHost: api.test\r\n\r\n", "encoded %2f"},
		{"get /public/x HTTP/1.1\r\nHost: api.test\r\n\r\n", "not upper case"},
		{"GET https://api.test/public/x HTTP/1.1\r\nHost: api.test\r\n\r\n", "origin-form"},
		{"GET /public/x HTTP/1.1\r\nHost: other.test\r\n\r\n", "Host header does not match"},
		{"POST /public/x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "request smuggling"},
		{"GET /private HTTP/1.1\r\nHost: api.test\r\n\r\n", "no request rule"},
	} {
		tc := tc
		conn := rawTLS(t, h, h.p.CAPEM())
		io.WriteString(conn, tc.req)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%q: %v", tc.req, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		got := fmt.Sprint(resp.StatusCode) + " " + string(b)
		if !strings.Contains(got, tc.want) || tc.want != "200" && resp.StatusCode == 200 {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
		conn.Close()
	}
	// Plain proxy requests (absolute-form) are checked the same way.
	c := h.raw(t)
	fmt.Fprintf(c, "GET http://api.test/public/%%2e%%2e/x HTTP/1.1\r\nHost: api.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 403 {
		t.Errorf("plain %%2e%%2e: %v %v", resp, err)
	}
}

func TestRequestBudgets(t *testing.T) {
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Requests: []policy.RequestRule{{Host: "api.test", Path: "/**"}},
		Budgets:  []policy.Budget{{Host: "api.test", RequestsPerMinute: 3, BytesUp: 64 << 10}}}
	h, c, _ := rulesHarness(t, n)
	for i := 0; i < 3; i++ {
		if got, body := status(t, c, "GET", "https://api.test/x"); got != 200 {
			t.Fatalf("request %d: %d %s", i, got, body)
		}
	}
	if got, body := status(t, c, "GET", "https://api.test/x"); got != 403 || !strings.Contains(body, "requests per minute") {
		t.Errorf("4th request: %d %q", got, body)
	}
	h.rec.wait(t, "rpm refusal", egressEvent("deny", "api.test", "requests per minute"))
}

func TestRequestBytesBudget(t *testing.T) {
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Requests: []policy.RequestRule{{Host: "api.test", Path: "/**"}},
		Budgets:  []policy.Budget{{Host: "api.test", BytesUp: 256 << 10}}}
	h, c, _ := rulesHarness(t, n)
	small, _ := http.NewRequest("POST", "https://api.test/up", strings.NewReader(strings.Repeat("a", 1000)))
	if resp, err := c.Do(small); err != nil || resp.StatusCode != 200 {
		t.Fatalf("small upload: %v %v", resp, err)
	}
	big, _ := http.NewRequest("POST", "https://api.test/up", strings.NewReader(strings.Repeat("a", 1<<20)))
	if resp, err := c.Do(big); err == nil && resp.StatusCode == 200 {
		t.Errorf("1 MiB upload passed a 256 KiB budget")
	}
	h.rec.wait(t, "bytes refusal", egressEvent("deny", "api.test", "bytes sent to api.test"))
}

func TestParseRequestRule(t *testing.T) {
	r, err := policy.ParseRequestRule("GET,HEAD github.com/**")
	if err != nil || r.Host != "github.com" || r.Path != "/**" || len(r.Methods) != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = policy.ParseRequestRule("POST example.com:8443/a/*/b?service=git-*")
	if err != nil || r.Host != "example.com:8443" || r.Query["service"] != "git-*" {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = policy.ParseRequestRule("GET,POST github.com/acme/** programs=/usr/lib/git-core/git-remote-https,node")
	if err != nil || r.Path != "/acme/**" || !slices.Equal(r.Programs, []string{"/usr/lib/git-core/git-remote-https", "node"}) {
		t.Fatalf("%+v %v", r, err)
	}
	for _, good := range []string{"GET 10.0.0.1/x", "GET 10.0.0.1:8080/x", "GET [2001:db8::1]:8443/x", "GET [::ffff:10.0.0.1]/x", "GET 2001:db8::1/x"} {
		if _, err := policy.ParseRequestRule(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"GET", "get x.test/", "GET x.test/a*b", "GET x.test/../a", "GET x.test/a;b",
		"GET 10.0.0.0/8/x", "GET 10.0.0.0/8", "GET 0177.0.0.1/x", "GET 2130706433/x", "GET 127.1/x", "GET [fe80::1%eth0]/x", "GET [2001:db8::1/x",
		"GET x.test/ programs=", "GET x.test/ programs=./git", "GET x.test/ programs=git,,node", "GET x.test/ programs=usr/bin/git",
		"GET x.test/ git", "GET x.test/ programs=git node", "GET x.test/ program=git"} {
		if _, err := policy.ParseRequestRule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRequestBoundsNarrow(t *testing.T) {
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Requests: []policy.RequestRule{{Host: "api.test"}}, // the tenant's: anything
		Bounds:   []policy.RequestRule{{Host: "api.test", Methods: []string{"GET"}, Path: "/ok/**"}}}
	h, c, _ := rulesHarness(t, n)
	if got, body := status(t, c, "GET", "https://api.test/ok/1"); got != 200 {
		t.Fatalf("GET within bounds: %d %s", got, body)
	}
	if got, body := status(t, c, "POST", "https://api.test/ok/1"); got != 403 || !strings.Contains(body, "operator's bounds") {
		t.Errorf("POST outside bounds: %d %q", got, body)
	}
	// A live change without bounds keeps them.
	n2 := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"}, Requests: []policy.RequestRule{{Host: "api.test"}}}
	if err := h.p.SetNetwork(n2); err != nil {
		t.Fatal(err)
	}
	if got, _ := status(t, c, "POST", "https://api.test/ok/1"); got != 403 {
		t.Errorf("POST after SetNetwork: %d", got)
	}
	// Rules for a host the CA was not made for need a new sandbox.
	n3 := policy.Network{Mode: policy.NetworkAllowlist, Requests: []policy.RequestRule{{Host: "new.test"}}}
	if err := h.p.SetNetwork(n3); err == nil || !strings.Contains(err.Error(), "new sandbox") {
		t.Errorf("SetNetwork with a new rule host: %v", err)
	}
}

// TestRequestRulesWebSocket: an upgrade is matched on its upgrade request,
// then the connection is relayed both ways.
func TestRequestRulesWebSocket(t *testing.T) {
	ca := newTestCA(t)
	port := startTLS(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "no upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		line, _ := brw.ReadString('\n')
		io.WriteString(conn, "echo "+line)
	}), "api.test")
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Requests: []policy.RequestRule{{Host: "api.test", Methods: []string{"GET"}, Path: "/ws/ok", Headers: map[string]string{"Upgrade": "websocket"}}}}
	h := newHarness(t, Config{Network: n, RootCAs: ca.Pool, Resolver: StaticResolver{"api.test": {loopback}}}, port)
	for _, tc := range []struct{ path, want string }{{"/ws/ok", "echo hello"}, {"/ws/other", "403"}} {
		conn := rawTLS(t, h, h.p.CAPEM())
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", tc.path)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if tc.want == "403" {
			if resp.StatusCode != 403 {
				t.Errorf("%s: %d", tc.path, resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != 101 {
			t.Fatalf("%s: %d", tc.path, resp.StatusCode)
		}
		io.WriteString(conn, "hello\n")
		line, _ := br.ReadString('\n')
		if strings.TrimSpace(line) != tc.want {
			t.Errorf("%s: relayed %q", tc.path, line)
		}
	}
}

// TestRequestRulesHTTP2: a client offering h2 to a ruled host speaks h2
// end to end (the origin sees HTTP/2), each request checked.
func TestRequestRulesHTTP2(t *testing.T) {
	ca := newTestCA(t)
	var mu sync.Mutex
	var protos []int
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.ProtoMajor)
		mu.Unlock()
		w.Header().Set("Trailer", "Grpc-Status")
		io.WriteString(w, "ok")
		w.Header().Set("Grpc-Status", "0")
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = ca.ServerConfig(t, "api.test")
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Requests: []policy.RequestRule{{Host: "api.test", Methods: []string{"GET"}, Path: "/ok/**"}}}
	h := newHarness(t, Config{Network: n, RootCAs: ca.Pool, Resolver: StaticResolver{"api.test": {loopback}}}, portOf(t, s.URL))
	pu, _ := url.Parse("http://" + h.addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: poolWith(t, h.p.CAPEM())}}}
	resp, err := c.Get("https://api.test/ok/1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || string(b) != "ok" || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("h2 GET: %d proto %d %q trailer %v", resp.StatusCode, resp.ProtoMajor, b, resp.Trailer)
	}
	resp, err = c.Post("https://api.test/ok/1", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "no request rule") {
		t.Errorf("h2 POST: %d %q", resp.StatusCode, b)
	}
	// :authority naming another host than the TLS target is refused.
	req, _ := http.NewRequest("GET", "https://api.test/ok/2", nil)
	req.Host = "other.test"
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest || resp.ProtoMajor != 2 {
		t.Errorf(":authority mismatch: %v %v", resp, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(protos) != 1 || protos[0] != 2 {
		t.Errorf("origin saw %v", protos)
	}
}
