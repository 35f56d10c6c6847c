package egress

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/airlock-dev/airlock/policy"
)

// benchSetup starts one HTTPS server (api.test: a secret host, other.test:
// tunnelled) and a proxy in front of it.
func benchSetup(b *testing.B) (*harness, *testCA, uint16, string) {
	ca := newTestCA(b)
	body := make([]byte, 16<<20)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(body)
			return
		}
		io.WriteString(w, "ok")
	})
	tlsPort := startTLS(b, ca, h, "api.test", "other.test")
	plainPort := startHTTP(b, h)
	hs := newHarness(b, Config{
		Network:  allowlist("api.test", "other.test", "127.0.0.1/32"),
		Resolver: StaticResolver{"api.test": {loopback}, "other.test": {loopback}},
		Secrets:  []policy.Secret{{Name: "K", FromEnv: "K", Hosts: []string{"api.test"}}},
		Getenv:   func(string) string { return "real-value" },
		RootCAs:  ca.Pool,
	}, tlsPort)
	return hs, ca, tlsPort, fmt.Sprint(plainPort)
}

func fetch(b *testing.B, c *http.Client, u string) {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkHTTPSRequest measures one HTTPS request on a new connection
// (TCP + TLS handshake + GET): direct, through the proxy's CONNECT tunnel
// (with the SNI check), and intercepted for a secret host (two TLS
// handshakes, header substitution). The difference is the added latency.
func BenchmarkHTTPSRequest(b *testing.B) {
	hs, ca, tlsPort, _ := benchSetup(b)
	direct := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: ca.Pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", tlsPort))
		},
	}}
	roots := ca.Pool.Clone()
	roots.AppendCertsFromPEM(hs.p.CAPEM())
	viaProxy := hs.client(roots)
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			fetch(b, direct, "https://other.test/")
		}
	})
	b.Run("proxy-tunnel", func(b *testing.B) {
		for b.Loop() {
			fetch(b, viaProxy, "https://other.test/")
		}
	})
	b.Run("proxy-intercept", func(b *testing.B) {
		for b.Loop() {
			fetch(b, viaProxy, "https://api.test/")
		}
	})
}

// BenchmarkThroughput moves 16 MiB per operation over loopback: plain HTTP
// direct and through a CONNECT tunnel; HTTPS direct and through an
// intercepted TLS connection (decrypted and re-encrypted by the proxy).
func BenchmarkThroughput(b *testing.B) {
	hs, ca, tlsPort, plainPort := benchSetup(b)
	pu, _ := url.Parse("http://" + hs.addr)
	keep := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: poolWith(b, hs.p.CAPEM())}}}
	direct := &http.Client{Transport: &http.Transport{}}
	// A CONNECT tunnel to a non-TLS port is pure relaying.
	tunnel := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := net.Dial("tcp", hs.addr)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(c, "CONNECT other.test:%s HTTP/1.1\r\n\r\n", plainPort)
		buf := make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n"))
		if _, err := io.ReadFull(c, buf); err != nil {
			return nil, err
		}
		return c, nil
	}}}
	directTLS := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", tlsPort))
		},
	}}
	for _, tc := range []struct {
		name string
		c    *http.Client
		u    string
	}{
		{"direct", direct, "http://127.0.0.1:" + plainPort + "/big"},
		{"proxy-tunnel", tunnel, "http://other.test:" + plainPort + "/big"},
		{"direct-tls", directTLS, "https://api.test/big"},
		{"proxy-intercept", keep, "https://api.test/big"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(16 << 20)
			for b.Loop() {
				fetch(b, tc.c, tc.u)
			}
		})
	}
}
