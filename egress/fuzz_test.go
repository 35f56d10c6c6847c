package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

// memConn is an egress stream whose client sent exactly in.
type memConn struct {
	r *bytes.Reader
}

func (c *memConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *memConn) Write(b []byte) (int, error) { return len(b), nil }
func (c *memConn) Close() error                { return nil }

// clientHello returns the bytes of a real TLS ClientHello for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	a, b := net.Pipe()
	go func() {
		tls.Client(a, &tls.Config{ServerName: serverName}).Handshake()
		a.Close()
	}()
	buf := make([]byte, 64<<10)
	n, _ := io.ReadAtLeast(b, buf, 5)
	b.Close()
	return buf[:n]
}

type countSink struct {
	mu    sync.Mutex
	n     int
	panic string
}

func (c *countSink) Emit(e audit.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if r, _ := e.Fields["reason"].(string); strings.HasPrefix(r, "internal error") {
		c.panic = r
	}
}

// FuzzParseRequest feeds arbitrary bytes to the proxy as an egress stream:
// HTTP proxy requests, CONNECT (with a TLS ClientHello after it) and SOCKS5.
// It must never panic or hang, and may only ever dial addresses that the
// policy and SSRF guard allow.
func FuzzParseRequest(f *testing.F) {
	hello := clientHello(f, "s.test")
	other := clientHello(f, "evil.test")
	for _, s := range [][]byte{
		[]byte("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"),
		[]byte("GET http://a.test:8080/x?y HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 3\r\n\r\nabcGET http://b.test/ HTTP/1.1\r\n\r\n"),
		[]byte("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
		[]byte("GET http://127.0.0.1/ HTTP/1.0\r\n\r\n"),
		[]byte("GET http://2130706433/ HTTP/1.1\r\n\r\n"),
		[]byte("GET http://[::ffff:127.0.0.1]/ HTTP/1.1\r\n\r\n"),
		[]byte("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n"),
		append([]byte("CONNECT s.test:443 HTTP/1.1\r\n\r\n"), hello...),
		append([]byte("CONNECT s.test:443 HTTP/1.1\r\n\r\n"), other...),
		append([]byte("CONNECT a.test:443 HTTP/1.1\r\n\r\n"), other...),
		[]byte("CONNECT a.test:22 HTTP/1.1\r\n\r\nSSH-2.0-x\r\n"),
		{5, 1, 0, 5, 1, 0, 3, 6, 'a', '.', 't', 'e', 's', 't', 0, 80, 'h', 'i'},
		{5, 1, 0, 5, 1, 0, 3, 10, 'a', '.', 't', 'e', 's', 't', 0, 'x', 'y', 'z', 1, 187},
		{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80},
		{5, 1, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1, 0, 80},
		{5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80},
		{5, 0},
		{4, 1, 0, 80, 127, 0, 0, 1, 0},
	} {
		f.Add(s)
	}
	allowed := netip.MustParsePrefix("127.0.0.0/8")
	f.Fuzz(func(t *testing.T, in []byte) {
		sink := &countSink{}
		p, err := New(Config{
			SandboxID: "sb-fuzz",
			Network:   policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"a.test", "s.test", "b.test:80", "127.0.0.0/8"}, Deny: []string{"b.test"}},
			Secrets:   []policy.Secret{{Name: "K", FromEnv: "K", Hosts: []string{"s.test"}}},
			Getenv:    func(string) string { return "real" },
			Resolver:  StaticResolver{"a.test": {netip.MustParseAddr("127.0.0.1")}, "s.test": {netip.MustParseAddr("127.0.0.2")}, "evil.test": {netip.MustParseAddr("169.254.169.254")}},
			Audit:     sink,
			LocalAddrs: func() ([]netip.Addr, error) {
				return nil, nil
			},
			Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
				if !allowed.Contains(ap.Addr()) {
					t.Fatalf("dialed %v", ap)
				}
				a, b := net.Pipe()
				go func() {
					b.Read(make([]byte, 4096))
					b.Close()
				}()
				return a, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			p.ServeEgress(context.Background(), "sb-fuzz", &memConn{r: bytes.NewReader(in)})
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second): // a hang guard, not a timing
			buf := make([]byte, 1<<20)
			t.Fatalf("ServeEgress hangs on %q:\n%s", in, buf[:runtime.Stack(buf, true)])
		}
		s := p.Stats()
		sink.mu.Lock()
		n, panicked := sink.n, sink.panic
		sink.mu.Unlock()
		if panicked != "" {
			t.Fatalf("ServeEgress panicked on %q: %s", in, panicked)
		}
		if s.Active != 0 || int(s.Allowed+s.Denied) != n {
			t.Fatalf("stats %+v vs %d events", s, n)
		}
	})
}

// FuzzRequestPath: a path the proxy accepts has no segment a server could
// read as another path (".", "..", empty but the last, "/" or "\" inside).
func FuzzRequestPath(f *testing.F) {
	for _, s := range []string{"/a/b", "/%2e%2e/x", "//x", "/a;b", "/a%2fb", "/%C3%A9/", "/a/../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !strings.HasPrefix(p, "/") {
			return
		}
		segs, why := pathSegments(p)
		if why != "" {
			return
		}
		for i, s := range segs {
			if s == "." || s == ".." || s == "" && i != len(segs)-1 || strings.ContainsAny(s, "/\\;") {
				t.Fatalf("%q accepted with segment %q", p, s)
			}
		}
		if _, err := policy.ParseRequestRule("GET x.test" + p); err == nil && slices.Contains(strings.Split(p, "/"), "..") {
			t.Fatalf("rule with .. accepted: %q", p)
		}
	})
}
