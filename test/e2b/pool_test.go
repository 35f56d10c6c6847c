package e2b_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2BPool: creates through the E2B door are served from a warm pool of
// their template (--pool-template) with exactly the network each asked
// for, and never hold a previous user's state (tests/pool.test.mjs). The
// host listener the deny-all sandbox must not reach is first reached from
// the host, and from a pooled sandbox whose policy allows it.
func TestE2BPool(t *testing.T) {
	const size = 4 // every create of pool.test.mjs comes from the pool
	ip := hostIP(t)
	s, key := startServer(t, "--pool-template", "base="+strconv.Itoa(size), "--pool-demand", "0",
		"--tenant-allow-cidr", ip+"/32")
	secret := fmt.Sprintf("airlock-pool-secret-%d", time.Now().UnixNano())
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, secret) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	hostAddr := ln.Addr().String()
	resp, err := http.Get("http://" + hostAddr + "/")
	if err != nil {
		t.Fatalf("the host listener is not reachable unconfined: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != secret {
		t.Fatalf("the host listener answered %q unconfined", b)
	}
	waitPooled(t, s, size)
	ids := filepath.Join(t.TempDir(), "ids")
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key,
		"POOL_HOST_ADDR=" + hostAddr, "POOL_SECRET=" + secret, "POOL_IDS_FILE=" + ids}, "tests/pool.test.mjs")
	made, err := os.ReadFile(ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, e2bID := range strings.Fields(string(made)) {
		id := "sb-" + strings.TrimPrefix(e2bID, "sb")
		if !strings.Contains(s.log.String(), `msg="sandbox created" sandbox=`+id) {
			t.Errorf("no creation of %s in the server log", id)
		} else if !strings.Contains(s.log.String(), `msg="sandbox created" sandbox=`+id+" tenant=e2b backend=native pooled=true") {
			t.Errorf("%s was not handed out from the pool", id)
		}
	}
	// Each create's tokens came with its /v1 create (access_tokens): the
	// door asked the access-tokens route for none.
	creates := apiRequests(t, s, "POST /v1/sandboxes", "201")
	if n := len(strings.Fields(string(made))); n == 0 || creates < n {
		t.Errorf("%d sandboxes made through the door, %d /v1 creates answered 201", n, creates)
	}
	if n := apiRequests(t, s, "POST /v1/sandboxes/{id}/access-tokens", ""); n != 0 {
		t.Errorf("the door asked POST /v1/sandboxes/{id}/access-tokens %d times; its creates' answers carry the tokens", n)
	}
}

// apiRequests is the server's count of /v1 requests of route (with
// status, or of any status when it is ""): its airlock_api_requests_total.
func apiRequests(t *testing.T, s *server, route, status string) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.socket)
	}}}
	r, err := hc.Get("http://airlock/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer r.Body.Close()
	prefix := `airlock_api_requests_total{route="` + route + `",status="` + status
	total := 0
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok || status != "" && !strings.HasPrefix(line, `"}`) {
			continue
		}
		_, v, _ := strings.Cut(line, "} ")
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("metrics line %q: %v", sc.Text(), err)
		}
		total += n
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return total
}

// waitPooled waits until the server holds n pooled sandboxes (its
// airlock_sandboxes gauge, on the unix socket).
func waitPooled(t *testing.T, s *server, n int) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.socket)
	}}}
	want := `airlock_sandboxes{backend="native",state="pooled"} ` + strconv.Itoa(n)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if r, err := hc.Get("http://airlock/metrics"); err == nil {
			sc := bufio.NewScanner(r.Body)
			for sc.Scan() {
				if sc.Text() == want {
					r.Body.Close()
					return
				}
			}
			r.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not fill to %d in 3 minutes:\n%s", n, tail(s.log.String(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
