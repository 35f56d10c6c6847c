package client_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
)

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }

func readHost(p string) ([]byte, error) { return os.ReadFile(p) }

// poolReady reads airlock_sandboxes{state="pooled"} from s's /metrics.
func poolReady(s *serveProc) int { return poolReadyFor(s, "native") }

// poolReadyFor reads the server's pooled-sandbox gauge of one backend.
func poolReadyFor(s *serveProc, backend string) int {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.socket)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://airlock/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if prefix := `airlock_sandboxes{backend="` + backend + `",state="pooled"} `; strings.HasPrefix(line, prefix) {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, prefix)))
			return n
		}
	}
	return 0
}
