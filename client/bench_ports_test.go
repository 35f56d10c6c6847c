package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// portPeers runs portsrv on the host (the direct peer) and in a native
// sandbox (reached through the port route over the unix socket); it
// returns a GET for each.
func portPeers(b *testing.B) (direct, proxied func(path string) (int64, error)) {
	c := requireNative(b).client(b)
	bin := buildPortServer(b)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Delete(ctx, sb.ID) })
	startPortServer(b, c, sb.ID, bin, 8000)
	addr := freePort(b)
	_, port, _ := net.SplitHostPort(addr)
	host := exec.Command(bin, port)
	if err := host.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { host.Process.Kill(); host.Wait() })
	hc := &http.Client{}
	eventually(b, "the host's portsrv listens", func() bool {
		resp, err := hc.Get("http://" + addr + "/hello")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	fetch := func(hc *http.Client, url string) (int64, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return n, err
	}
	return func(p string) (int64, error) { return fetch(hc, "http://"+addr+"/"+p) },
		func(p string) (int64, error) { return fetch(c.HTTPClient(), c.URL(sb.ID, 8000)+p) }
}

// BenchmarkPortProxyRoundTrip: a small GET to the same server on the host
// (direct, TCP loopback) and inside a sandbox through the port route
// (unix socket, server, agent dial stream), alternated in one run.
func BenchmarkPortProxyRoundTrip(b *testing.B) {
	direct, proxied := portPeers(b)
	var dd, dp []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, peer := range []struct {
			get func(string) (int64, error)
			ds  *[]time.Duration
		}{{direct, &dd}, {proxied, &dp}} {
			t0 := time.Now()
			if _, err := peer.get("hello"); err != nil {
				b.Fatal(err)
			}
			*peer.ds = append(*peer.ds, time.Since(t0))
		}
	}
	b.StopTimer()
	d, p := median(dd), median(dp)
	b.ReportMetric(float64(d.Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64(p.Microseconds())/1000, "proxy-p50-ms")
	b.ReportMetric(float64(p)/float64(d), "proxy/direct")
}

// BenchmarkPortProxyDownload: MB/s of a 32 MiB download, direct beside
// through the port route, alternated in one run.
func BenchmarkPortProxyDownload(b *testing.B) {
	direct, proxied := portPeers(b)
	const size = 32 << 20
	path := fmt.Sprintf("big?n=%d", size)
	var td, tp time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, peer := range []struct {
			get func(string) (int64, error)
			t   *time.Duration
		}{{direct, &td}, {proxied, &tp}} {
			t0 := time.Now()
			n, err := peer.get(path)
			if err != nil || n != size {
				b.Fatal(n, err)
			}
			*peer.t += time.Since(t0)
		}
	}
	b.StopTimer()
	mbs := func(t time.Duration) float64 { return float64(size) * float64(b.N) / t.Seconds() / 1e6 }
	b.ReportMetric(mbs(td), "direct-MB/s")
	b.ReportMetric(mbs(tp), "proxy-MB/s")
	b.ReportMetric(mbs(tp)/mbs(td), "proxy/direct")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
