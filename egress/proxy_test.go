package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	xproxy "golang.org/x/net/proxy"
)

func hello(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from "+r.Host) }

func allowlist(allow ...string) policy.Network {
	return policy.Network{Mode: policy.NetworkAllowlist, Allow: allow}
}

func TestPlainHTTPAllowed(t *testing.T) {
	port := startHTTP(t, http.HandlerFunc(hello))
	h := newHarness(t, Config{
		Network:  allowlist("web.test", "127.0.0.1/32"),
		Resolver: StaticResolver{"web.test": {loopback}},
	}, 0)
	resp, err := h.client(nil).Get(fmt.Sprintf("http://WEB.test.:%d/x", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != fmt.Sprintf("hello from web.test:%d", port) {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	e := h.rec.wait(t, "allow web.test", egressEvent("allow", "web.test", ""))
	if e.Fields["addr"] != "127.0.0.1" || e.Fields["port"] != int(port) || e.Fields["proto"] != "http" {
		t.Errorf("event fields: %v", e.Fields)
	}
	if e.Fields["bytes_sent"].(int64) == 0 || e.Fields["bytes_recv"].(int64) < int64(len(body)) {
		t.Errorf("bytes not counted: %v", e.Fields)
	}
	if s := h.p.Stats(); s.Allowed != 1 || s.Denied != 0 || s.BytesReceived == 0 {
		t.Errorf("stats %+v", s)
	}
}

// The loopback guard holds for an allowed name unless a CIDR allows the
// address: the same server, the same name, only the CIDR differs.
func TestLoopbackGuard(t *testing.T) {
	port := startHTTP(t, http.HandlerFunc(hello))
	ca := newTestCA(t)
	tlsPort := startTLS(t, ca, http.HandlerFunc(hello), "web.test")
	h := newHarness(t, Config{
		Network:  allowlist("web.test"),
		Resolver: StaticResolver{"web.test": {loopback}},
	}, tlsPort)
	resp, err := h.client(nil).Get(fmt.Sprintf("http://web.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("plain HTTP to a name resolving to 127.0.0.1: got %d, want 403", resp.StatusCode)
	}
	if _, err := h.client(ca.Pool).Get("https://web.test/"); err == nil {
		t.Fatal("CONNECT to a name resolving to 127.0.0.1 succeeded")
	}
	h.rec.wait(t, "deny loopback (http)", func(e audit.Event) bool {
		return egressEvent("deny", "web.test", "is loopback")(e) && e.Fields["proto"] == "http" && e.Fields["addr"] == "127.0.0.1"
	})
	h.rec.wait(t, "deny loopback (connect)", func(e audit.Event) bool {
		return egressEvent("deny", "web.test", "is loopback")(e) && e.Fields["proto"] == "connect"
	})
	if d := h.dialed(); len(d) != 0 {
		t.Fatalf("proxy dialed %v for denied targets", d)
	}
	// The same name and server with the address explicitly allowed.
	if err := h.p.SetNetwork(allowlist("web.test", "127.0.0.1/32")); err != nil {
		t.Fatal(err)
	}
	resp, err = h.client(nil).Get(fmt.Sprintf("http://web.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("with 127.0.0.1/32 allowed: got %d", resp.StatusCode)
	}
}

func TestMetadataAndPrivateGuard(t *testing.T) {
	h := newHarness(t, Config{
		Network: allowlist("meta.test", "private.test", "cgnat.test", "mixed.test", "*.open.test"),
		Resolver: StaticResolver{
			"meta.test":    {netip.MustParseAddr("169.254.169.254")},
			"private.test": {netip.MustParseAddr("10.1.2.3")},
			"cgnat.test":   {netip.MustParseAddr("100.64.1.1")},
			"mixed.test":   {netip.MustParseAddr("::ffff:169.254.169.254"), netip.MustParseAddr("fd00::1")},
		},
	}, 0)
	for _, host := range []string{"meta.test", "private.test", "cgnat.test", "mixed.test"} {
		resp, err := h.client(nil).Get("http://" + host + "/latest/meta-data/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: got %d, want 403", host, resp.StatusCode)
		}
		h.rec.wait(t, "deny "+host, egressEvent("deny", host, " is "))
	}
	// Literal addresses are refused at the name stage (no CIDR allows them).
	for _, u := range []string{"http://169.254.169.254/", "http://[::ffff:169.254.169.254]/", "http://[fe80::1]/"} {
		resp, err := h.client(nil).Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: got %d, want 403", u, resp.StatusCode)
			}
		}
	}
	h.rec.wait(t, "deny metadata literal", egressEvent("deny", "169.254.169.254", "not in an allowed CIDR"))
	if d := h.dialed(); len(d) != 0 {
		t.Fatalf("proxy dialed %v", d)
	}
	if s := h.p.Stats(); s.Allowed != 0 || s.Denied < 7 {
		t.Errorf("stats %+v", s)
	}
}

// readResponse reads one HTTP response from a raw connection.
func readResponse(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestOddIPLiteralsRefused(t *testing.T) {
	port := startHTTP(t, http.HandlerFunc(hello))
	h := newHarness(t, Config{Network: policy.Network{Mode: policy.NetworkOpen, Allow: []string{"127.0.0.0/8"}}}, 0)
	// Sanity: the canonical literal is allowed here (open + CIDR).
	resp, err := h.client(nil).Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("canonical literal: %d", resp.StatusCode)
	}
	for _, lit := range []string{"2130706433", "0x7f000001", "0177.0.0.1", "127.1", "127.0.0.01", "0x7f.1"} {
		c := h.raw(t)
		fmt.Fprintf(c, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", lit, port, lit, port)
		if r := readResponse(t, c); r.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %s: %d", lit, r.StatusCode)
		}
		c = h.raw(t)
		fmt.Fprintf(c, "GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n", lit, port, lit, port)
		if r := readResponse(t, c); r.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s: %d", lit, r.StatusCode)
		}
		h.rec.wait(t, "deny "+lit, egressEvent("deny", lit, "non-canonical IP literal"))
	}
	// And through SOCKS5 as a domain name.
	d, _ := xproxy.SOCKS5("tcp", h.addr, nil, xproxy.Direct)
	if c, err := d.Dial("tcp", fmt.Sprintf("2130706433:%d", port)); err == nil {
		c.Close()
		t.Fatal("SOCKS5 to 2130706433 succeeded")
	}
	h.rec.wait(t, "deny socks decimal", func(e audit.Event) bool {
		return egressEvent("deny", "2130706433", "non-canonical")(e) && e.Fields["proto"] == "socks5"
	})
	if n := len(h.dialed()); n != 1 {
		t.Errorf("dialed %d times, want 1 (the canonical literal)", n)
	}
}

func TestHostHeaderMustAgree(t *testing.T) {
	port := startHTTP(t, http.HandlerFunc(hello))
	h := newHarness(t, Config{
		Network:  allowlist("web.test", "127.0.0.1/32"),
		Resolver: StaticResolver{"web.test": {loopback}, "evil.test": {loopback}},
	}, 0)
	for _, hdr := range []string{"evil.test", fmt.Sprintf("evil.test:%d", port), fmt.Sprintf("web.test:%d\r\nHost: evil.test", port), fmt.Sprintf("web.test:%d", port+1)} {
		c := h.raw(t)
		fmt.Fprintf(c, "GET http://web.test:%d/ HTTP/1.1\r\nHost: %s\r\n\r\n", port, hdr)
		if r := readResponse(t, c); r.StatusCode == 200 {
			t.Errorf("Host %q: got 200", hdr)
		}
	}
	c := h.raw(t)
	fmt.Fprintf(c, "CONNECT web.test:%d HTTP/1.1\r\nHost: evil.test:%d\r\n\r\n", port, port)
	if r := readResponse(t, c); r.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT with other Host: %d", r.StatusCode)
	}
	// Agreeing headers (case, trailing dot, default port) pass.
	c = h.raw(t)
	fmt.Fprintf(c, "GET http://web.test:%d/ HTTP/1.1\r\nHost: WEB.test.:%d\r\nConnection: close\r\n\r\n", port, port)
	if r := readResponse(t, c); r.StatusCode != 200 {
		t.Errorf("agreeing Host: %d", r.StatusCode)
	}
	h.rec.wait(t, "deny host mismatch", egressEvent("deny", "web.test", "differs from URI host"))
	if len(h.dialed()) != 1 {
		t.Errorf("dials: %v", h.dialed())
	}
}

func TestMalformedRequests(t *testing.T) {
	h := newHarness(t, Config{Network: policy.Network{Mode: policy.NetworkOpen}}, 0)
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n",                        // origin form to a proxy
		"GET https://web.test/ HTTP/1.1\r\nHost: web.test\r\n\r\n",        // https without CONNECT
		"GET http://user@web.test/ HTTP/1.1\r\nHost: web.test\r\n\r\n",    // user info
		"CONNECT web.test HTTP/1.1\r\n\r\n",                               // no port
		"CONNECT web.test:0 HTTP/1.1\r\n\r\n",                             // port 0
		"CONNECT [::1 HTTP/1.1\r\n\r\n",                                   // broken literal
		"CONNECT web.test:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", // body
		"GET http://a\x00b.test/ HTTP/1.1\r\n\r\n",
		"GET http://web.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", 40<<10) + "\r\n\r\n",
		"\x16\x03\x01\x00\x05hello",
	} {
		c := h.raw(t)
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode < 400 {
			t.Errorf("%q: got %d", req[:min(len(req), 60)], resp.StatusCode)
		}
	}
	if len(h.dialed()) != 0 {
		t.Errorf("dialed %v", h.dialed())
	}
}

// socksConnect sends a raw SOCKS5 CONNECT and returns the reply code.
func socksConnect(t *testing.T, h *harness, atyp byte, addr []byte, port uint16) (byte, net.Conn) {
	t.Helper()
	c := h.raw(t)
	msg := []byte{5, 1, 0, 5, 1, 0, atyp}
	if atyp == socksAtypDomain {
		msg = append(msg, byte(len(addr)))
	}
	msg = append(msg, addr...)
	msg = append(msg, byte(port>>8), byte(port))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	var rep [12]byte
	if _, err := io.ReadFull(c, rep[:2]); err != nil || rep[0] != 5 || rep[1] != 0 {
		t.Fatalf("greeting reply %v %v", rep[:2], err)
	}
	if _, err := io.ReadFull(c, rep[2:12]); err != nil {
		t.Fatalf("request reply: %v", err)
	}
	return rep[3], c
}

func TestSOCKS5(t *testing.T) {
	port := startHTTP(t, http.HandlerFunc(hello))
	h := newHarness(t, Config{
		Network:  allowlist("web.test", "127.0.0.1/32"),
		Resolver: StaticResolver{"web.test": {loopback}, "evil.test": {loopback}},
	}, 0)

	// Domain name through a real SOCKS5 client.
	d, _ := xproxy.SOCKS5("tcp", h.addr, nil, xproxy.Direct)
	tr := &http.Transport{DialContext: d.(xproxy.ContextDialer).DialContext, DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("http://web.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("SOCKS5 domain: %d", resp.StatusCode)
	}

	// NUL inside the domain: a differential that fooled suffix checks elsewhere.
	for _, name := range []string{"evil.test\x00web.test", "web.test\x00.evil.test", "web.test\x00", "web.test ", "web.test\r\n"} {
		code, _ := socksConnect(t, h, socksAtypDomain, []byte(name), port)
		if code != socksNotAllowed {
			t.Errorf("SOCKS domain %q: reply %d, want %d", name, code, socksNotAllowed)
		}
	}
	h.rec.wait(t, "deny NUL", func(e audit.Event) bool {
		return egressEvent("deny", `"evil.test\x00web.test"`, "control byte")(e) && e.Fields["proto"] == "socks5"
	})

	// IPv4, IPv4-mapped IPv6 (same as IPv4), IPv6 loopback (not allowed).
	if code, c := socksConnect(t, h, socksAtypIPv4, []byte{127, 0, 0, 1}, port); code != socksOK {
		t.Errorf("IPv4 127.0.0.1 with CIDR: reply %d", code)
	} else {
		c.Close()
	}
	mapped := netip.MustParseAddr("::ffff:127.0.0.1").As16()
	if code, c := socksConnect(t, h, socksAtypIPv6, mapped[:], port); code != socksOK {
		t.Errorf("IPv4-mapped IPv6: reply %d", code)
	} else {
		c.Close()
	}
	v6 := netip.IPv6Loopback().As16()
	if code, _ := socksConnect(t, h, socksAtypIPv6, v6[:], port); code != socksNotAllowed {
		t.Errorf("::1: reply %d", code)
	}
	if code, _ := socksConnect(t, h, socksAtypIPv4, []byte{169, 254, 169, 254}, 80); code != socksNotAllowed {
		t.Errorf("169.254.169.254: reply %d", code)
	}
	if code, _ := socksConnect(t, h, socksAtypDomain, []byte("evil.test"), port); code != socksNotAllowed {
		t.Errorf("evil.test: reply %d", code)
	}
	// BIND and UDP ASSOCIATE are not offered.
	c := h.raw(t)
	c.Write([]byte{5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 53})
	var rep [12]byte
	if _, err := io.ReadFull(c, rep[:12]); err != nil || rep[3] != socksCmdUnsupported {
		t.Errorf("UDP ASSOCIATE reply %v %v", rep, err)
	}
	// No acceptable auth method.
	c = h.raw(t)
	c.Write([]byte{5, 1, 2})
	if _, err := io.ReadFull(c, rep[:2]); err != nil || rep[1] != socksNoAcceptable {
		t.Errorf("auth reply %v %v", rep[:2], err)
	}
}

// tlsVia opens a CONNECT tunnel to target and runs a TLS handshake with
// serverName inside it.
func tlsVia(t *testing.T, h *harness, target, serverName string, roots interface{}) error {
	t.Helper()
	c := h.raw(t)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("CONNECT: %d", resp.StatusCode)
	}
	cfg := &tls.Config{ServerName: serverName, InsecureSkipVerify: true}
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		return err
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", serverName)
	r, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return err
	}
	r.Body.Close()
	return nil
}

func TestConnectSNI(t *testing.T) {
	ca := newTestCA(t)
	tlsPort := startTLS(t, ca, http.HandlerFunc(hello), "api.test", "other.test")
	h := newHarness(t, Config{
		Network:  allowlist("api.test", "127.0.0.1/32"),
		Resolver: StaticResolver{"api.test": {loopback}},
	}, tlsPort)
	if err := tlsVia(t, h, "api.test:443", "api.test", nil); err != nil {
		t.Fatalf("matching SNI: %v", err)
	}
	if err := tlsVia(t, h, "api.test:443", "API.TEST", nil); err != nil {
		t.Fatalf("matching SNI (case): %v", err)
	}
	if err := tlsVia(t, h, "api.test:443", "other.test", nil); err == nil {
		t.Fatal("CONNECT api.test with SNI other.test succeeded")
	}
	h.rec.wait(t, "deny SNI", egressEvent("deny", "api.test", "SNI other.test differs"))
	// No SNI for a named target (an IP ServerName sends none).
	if err := tlsVia(t, h, "api.test:443", "127.0.0.1", nil); err == nil {
		t.Fatal("CONNECT api.test without SNI succeeded")
	}
	h.rec.wait(t, "deny no SNI", egressEvent("deny", "api.test", "without SNI"))
	// For an IP literal target, no SNI is what clients send.
	if err := tlsVia(t, h, "127.0.0.1:443", "127.0.0.1", nil); err != nil {
		t.Fatalf("IP target without SNI: %v", err)
	}
	// Not TLS at all on 443.
	c := h.raw(t)
	fmt.Fprintf(c, "CONNECT api.test:443 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: api.test\r\n\r\n")
	readResponse(t, c)
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("plain text inside CONNECT :443 was relayed")
	}
	h.rec.wait(t, "deny not TLS", egressEvent("deny", "api.test", "ClientHello"))
	// SOCKS5 gets the same check.
	d, _ := xproxy.SOCKS5("tcp", h.addr, nil, xproxy.Direct)
	sc, err := d.Dial("tcp", "api.test:443")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := tls.Client(sc, &tls.Config{ServerName: "other.test", InsecureSkipVerify: true}).Handshake(); err == nil {
		t.Fatal("SOCKS5 api.test:443 with SNI other.test succeeded")
	}
	h.rec.wait(t, "deny SNI socks", func(e audit.Event) bool {
		return egressEvent("deny", "api.test", "differs")(e) && e.Fields["proto"] == "socks5"
	})
}

func TestModeNone(t *testing.T) {
	port := startHTTP(t, http.HandlerFunc(hello))
	h := newHarness(t, Config{
		Network:  policy.Network{Mode: policy.NetworkNone, Allow: []string{"web.test", "127.0.0.1/32"}},
		Resolver: StaticResolver{"web.test": {loopback}},
	}, 0)
	resp, err := h.client(nil).Get(fmt.Sprintf("http://web.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("mode none: %d", resp.StatusCode)
	}
	h.rec.wait(t, "deny none", egressEvent("deny", "web.test", "mode none"))
	if _, ok := h.p.SandboxEnv()["HTTP_PROXY"]; ok {
		t.Error("mode none still sets HTTP_PROXY")
	}
}

func TestEmptyAllowListAllowsNothing(t *testing.T) {
	port := startHTTP(t, http.HandlerFunc(hello))
	h := newHarness(t, Config{Network: allowlist(), Resolver: StaticResolver{"web.test": {loopback}}}, 0)
	resp, err := h.client(nil).Get(fmt.Sprintf("http://web.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("empty allow list: %d", resp.StatusCode)
	}
}

func TestSetNetworkLive(t *testing.T) {
	block := make(chan struct{})
	port := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer close(block)
	h := newHarness(t, Config{
		Network:  allowlist("web.test", "127.0.0.1/32"),
		Resolver: StaticResolver{"web.test": {loopback}},
	}, 0)
	resp, err := h.client(nil).Get(fmt.Sprintf("http://web.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	// The response is streaming; cut it by removing web.test.
	if err := h.p.SetNetwork(allowlist("127.0.0.1/32")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("open connection survived the policy change")
	}
	h.rec.wait(t, "policy event", func(e audit.Event) bool { return e.Type == audit.TypePolicy && e.Fields["closed_connections"] == 1 })
	h.rec.wait(t, "closed by policy", func(e audit.Event) bool {
		return egressEvent("allow", "web.test", "")(e) && e.Fields["closed_by"] == "policy changed"
	})
	resp, err = h.client(nil).Get(fmt.Sprintf("http://web.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("after change: %d", resp.StatusCode)
	}
	if err := h.p.SetNetwork(policy.Network{Mode: "allowlist", Allow: []string{"*.com"}}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("bad network: %v", err)
	}
}

func TestBytesCounted(t *testing.T) {
	const down = 3 << 20
	const up = 1 << 20
	var gotUp int64
	port := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUp, _ = io.Copy(io.Discard, r.Body)
		w.Write(make([]byte, down))
	}))
	h := newHarness(t, Config{
		Network:  allowlist("web.test", "127.0.0.1/32"),
		Resolver: StaticResolver{"web.test": {loopback}},
	}, 0)
	for _, via := range []string{"http", "socks5"} {
		c := h.client(nil)
		if via == "socks5" {
			d, _ := xproxy.SOCKS5("tcp", h.addr, nil, xproxy.Direct)
			c = &http.Client{Transport: &http.Transport{DialContext: d.(xproxy.ContextDialer).DialContext, DisableKeepAlives: true}}
		}
		resp, err := c.Post(fmt.Sprintf("http://web.test:%d/", port), "application/octet-stream", strings.NewReader(strings.Repeat("x", up)))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != down || gotUp != up {
			t.Fatalf("%s: moved %d down, %d up", via, n, gotUp)
		}
		e := h.rec.wait(t, "allow "+via, func(e audit.Event) bool {
			return egressEvent("allow", "web.test", "")(e) && e.Fields["proto"] == via
		})
		s, r := e.Fields["bytes_sent"].(int64), e.Fields["bytes_recv"].(int64)
		if s < up || s > up+4096 || r < down || r > down+4096 {
			t.Errorf("%s: counted sent %d recv %d, moved %d/%d", via, s, r, up, down)
		}
	}
	if s := h.p.Stats(); s.BytesSent < 2*up || s.BytesReceived < 2*down {
		t.Errorf("stats %+v", s)
	}
}

// rebinder answers differently on every lookup, like a DNS-rebinding name.
type rebinder struct {
	mu    sync.Mutex
	calls int
	seq   [][]netip.Addr
}

func (r *rebinder) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.seq[min(r.calls, len(r.seq)-1)]
	r.calls++
	return a, nil
}

// The proxy resolves once per connection, checks every answer, skips the
// refused ones and dials exactly an address it checked.
func TestResolveOnceDialChecked(t *testing.T) {
	port := startHTTP(t, http.HandlerFunc(hello))
	r := &rebinder{seq: [][]netip.Addr{
		{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("8.8.8.8"), loopback},
		{netip.MustParseAddr("127.0.0.2")},
	}}
	h := newHarness(t, Config{
		Network:    allowlist("rebind.test", "127.0.0.1/32"),
		Resolver:   r,
		LocalAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("8.8.8.8")}, nil },
	}, 0)
	resp, err := h.client(nil).Get(fmt.Sprintf("http://rebind.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r.mu.Lock()
	if r.calls != 1 {
		t.Errorf("resolved %d times for one connection", r.calls)
	}
	r.mu.Unlock()
	if d := h.dialed(); len(d) != 1 || d[0] != netip.AddrPortFrom(loopback, port) {
		t.Errorf("dialed %v, want only 127.0.0.1:%d", d, port)
	}
	// The second answer (127.0.0.2, not covered by the CIDR) is refused.
	resp, err = h.client(nil).Get(fmt.Sprintf("http://rebind.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("second lookup: %d", resp.StatusCode)
	}
	// Only the host's own address, a public-looking one, is refused too.
	r.mu.Lock()
	r.seq = append(r.seq, []netip.Addr{netip.MustParseAddr("8.8.8.8")})
	r.calls = 2
	r.mu.Unlock()
	resp, err = h.client(nil).Get("http://rebind.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h.rec.wait(t, "deny own address", egressEvent("deny", "rebind.test", "address of this host"))
	if len(h.dialed()) != 1 {
		t.Errorf("dialed %v", h.dialed())
	}
}
