package egress

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/policy"
)

// BenchmarkRequestRules compares, side by side over kept-alive HTTPS
// connections through the proxy, a host without rules (a CONNECT tunnel:
// the proxy only relays bytes) and a host with 20 request rules (TLS
// intercepted, every request parsed and matched, last rule matching).
// "p50-us" is the median time of one small GET; the upload cases move
// 16 MiB per operation (bytes/s is their throughput).
//
//	go test ./egress/ -run '^$' -bench BenchmarkRequestRules -benchtime 300x
func BenchmarkRequestRules(b *testing.B) {
	ca := newTestCA(b)
	port := startTLS(b, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}), "rules.test", "tunnel.test")
	var rules []policy.RequestRule
	for i := 0; i < 19; i++ {
		rules = append(rules, policy.RequestRule{Host: "rules.test", Methods: []string{"GET"}, Path: fmt.Sprintf("/other/%d/**", i)})
	}
	rules = append(rules, policy.RequestRule{Host: "rules.test", Methods: []string{"GET", "POST"}, Path: "/api/*/items/**"})
	hs := newHarness(b, Config{
		Network:  policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"tunnel.test", "127.0.0.1/32:443"}, Requests: rules},
		Resolver: StaticResolver{"rules.test": {loopback}, "tunnel.test": {loopback}},
		RootCAs:  ca.Pool,
	}, port)
	pu, _ := url.Parse("http://" + hs.addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu),
		TLSClientConfig: &tls.Config{RootCAs: poolWith(b, hs.p.CAPEM(), pemOf(ca))}}}
	for _, host := range []string{"tunnel.test", "rules.test"} {
		u := "https://" + host + "/api/v1/items/42"
		b.Run("get-"+host, func(b *testing.B) {
			fetch(b, c, u) // the connection is made outside the timing
			var ds []time.Duration
			for b.Loop() {
				t0 := time.Now()
				fetch(b, c, u)
				ds = append(ds, time.Since(t0))
			}
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-us")
		})
	}
	body := bytes.Repeat([]byte("x"), 16<<20)
	for _, host := range []string{"tunnel.test", "rules.test"} {
		u := "https://" + host + "/api/v1/items/upload"
		b.Run("upload-"+host, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				resp, err := c.Post(u, "application/octet-stream", bytes.NewReader(body))
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("upload: %v %v", resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
