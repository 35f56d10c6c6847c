package docker

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend/internal/backendtest"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestEgressThroughProxy: the container has no network; with an
// allowlist, the agent's loopback listener tunnels to the host's egress
// proxy as on every backend: allowed names are reached, others refused,
// and a direct connection around the proxy goes nowhere.
func TestEgressThroughProxy(t *testing.T) {
	b := testBackend(t)
	port := backendtest.HelloServer(t)
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("unconfined request failed: %v", err)
	}
	network := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"web.test", fmt.Sprintf("127.0.0.1/32:%d", port)}}
	pol := testPolicy(t, workspace(t), func(p *policy.Policy) { direct(p); p.Network = network })
	loop := netip.MustParseAddr("127.0.0.1")
	id := newID(t)
	px, err := egress.New(egress.Config{SandboxID: id, Network: pol.Network,
		Resolver: egress.StaticResolver{"web.test": {loop}, "other.test": {loop}}})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{ID: id, Policy: pol}
	bundle, _ := egress.SystemBundle()
	px.Attach(&spec, bundle)
	sb := create(t, b, spec)
	st, out := sh(t, sb, fmt.Sprintf("curl -sS --max-time 20 http://web.test:%d/", port))
	if st.Code != 0 || out != "HELLO-FROM-HOST" {
		t.Fatalf("allowed request through the proxy: %+v %q", st, out)
	}
	st, out = sh(t, sb, fmt.Sprintf("curl -sS --max-time 20 -o /dev/null -w '%%{http_code}' http://other.test:%d/", port))
	if st.Code == 0 && strings.HasPrefix(out, "2") {
		t.Fatalf("request to a name not allowed got through: %+v %q", st, out)
	}
	st, out = sh(t, sb, fmt.Sprintf("curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:%d/", port))
	if st.Code == 0 || strings.Contains(out, "HELLO-FROM-HOST") {
		t.Fatalf("direct connection around the proxy reached the host: %+v %q", st, out)
	}
	st, out = sh(t, sb, "cat /proc/net/dev | tail -n +3 | cut -d: -f1")
	if strings.TrimSpace(out) != "lo" {
		t.Fatalf("interfaces inside: %q, want only lo", out)
	}
}
