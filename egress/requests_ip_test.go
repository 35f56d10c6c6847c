package egress

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

// TestRequestRulesIPLiteral: request rules may name one address. HTTPS to
// 127.0.0.1 is intercepted (the sandbox CA may vouch for that address and
// no other), plain HTTP to [::1] is checked, the IPv4-mapped spelling of a
// ruled address meets the same rules, and an address without rules stays a
// tunnel.
func TestRequestRulesIPLiteral(t *testing.T) {
	ca := newTestCA(t)
	var mu sync.Mutex
	var seen []string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		io.WriteString(w, "ok")
	})
	tlsPort := startTLS(t, ca, handler, "127.0.0.1")
	ln6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln6, handler)
	t.Cleanup(func() { ln6.Close() })
	port6 := ln6.Addr().(*net.TCPAddr).Port
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443", fmt.Sprintf("[::1]:%d", port6)},
		Requests: []policy.RequestRule{
			{Host: "127.0.0.1", Methods: []string{"GET"}, Path: "/ok/**"},
			{Host: fmt.Sprintf("[::1]:%d", port6), Methods: []string{"GET"}, Path: "/v6/*"},
		}}
	h := newHarness(t, Config{Network: n, RootCAs: ca.Pool}, tlsPort)
	pu, _ := url.Parse("http://" + h.addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: poolWith(t, h.p.CAPEM())}}}
	for _, tc := range []struct {
		url  string
		want int
	}{
		{"https://127.0.0.1/ok/1", 200},
		{"https://127.0.0.1/secret", 403},
		{"https://[::ffff:127.0.0.1]/secret", 403},
		{fmt.Sprintf("http://[::1]:%d/v6/a", port6), 200},
		{fmt.Sprintf("http://[::1]:%d/v6/a/b", port6), 403},
		{fmt.Sprintf("http://[0:0:0:0:0:0:0:1]:%d/other", port6), 403},
	} {
		if got, body := status(t, c, "GET", tc.url); got != tc.want {
			t.Errorf("GET %s: %d %q, want %d", tc.url, got, body, tc.want)
		}
	}
	h.rec.wait(t, "request deny event for the address", func(e audit.Event) bool {
		return e.Fields["request"] == true && e.Fields["action"] == "deny" && e.Fields["host"] == "127.0.0.1" && e.Fields["path"] == "/secret"
	})
	// The sandbox CA vouches for 127.0.0.1 and no other address.
	caCert, _ := x509.ParseCertificate(h.p.ca.certDER)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	for ip, ok := range map[string]bool{"127.0.0.1": true, "127.0.0.2": false, "::1": true, "::2": false} {
		leaf, err := h.p.ca.leaf(ip)
		if err != nil {
			t.Fatal(err)
		}
		lc, _ := x509.ParseCertificate(leaf.Certificate[0])
		if _, err := lc.Verify(x509.VerifyOptions{DNSName: ip, Roots: pool}); (err == nil) != ok {
			t.Errorf("the sandbox CA for %s: %v, want trusted=%v", ip, err, ok)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, " ") != "/ok/1 /v6/a" {
		t.Errorf("the servers saw %q", seen)
	}
}
