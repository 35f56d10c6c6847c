package microvm

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

// TestEgressThroughProxy: with an allowlist, the agent's loopback listener
// inside the VM
// tunnels to the host's egress proxy over the agent channel exactly as in
// the native backend; allowed names are reached, others refused, and the VM
// has no other way out (no NIC).
func TestEgressThroughProxy(t *testing.T) {
	b := testBackend(t, false)
	port := backendtest.HelloServer(t)
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("unconfined request failed: %v", err)
	}
	network := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"web.test", fmt.Sprintf("127.0.0.1/32:%d", port)}}
	ws := workspace(t)
	pol := testPolicy(t, ws, false)
	pol.Network = network
	loop := netip.MustParseAddr("127.0.0.1")
	rec := &backendtest.Events{}
	id := "eg-" + randID()
	px, err := egress.New(egress.Config{SandboxID: id, Network: pol.Network, Audit: rec,
		Resolver: egress.StaticResolver{"web.test": {loop}, "other.test": {loop}}})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := egress.SystemBundle()
	if err != nil {
		t.Fatal(err)
	}
	sb := create(t, b, sandbox.Spec{ID: id, Policy: pol, Egress: px, Env: px.SandboxEnv(), Files: px.SandboxFiles(bundle)})
	st, out := sh(t, sb, fmt.Sprintf("curl -sS --max-time 20 http://web.test:%d/", port))
	if st.Code != 0 || out != "HELLO-FROM-HOST" {
		t.Fatalf("allowed request through the proxy: %+v %q; audit %+v", st, out, rec.All())
	}
	st, out = sh(t, sb, fmt.Sprintf("curl -sS --max-time 20 -o /dev/null -w '%%{http_code}' http://other.test:%d/", port))
	if st.Code == 0 && strings.HasPrefix(out, "2") {
		t.Fatalf("request to a name not allowed got through: %+v %q", st, out)
	}
	t.Logf("not allowed: %+v %q", st, out)
	st, out = sh(t, sb, fmt.Sprintf("curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:%d/", port))
	if st.Code == 0 || strings.Contains(out, "HELLO-FROM-HOST") {
		t.Fatalf("direct connection around the proxy reached the host: %+v %q", st, out)
	}
}
