package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/admission"
)

// TestNetworkChangeReachesRunningSandbox: with the real native backend and
// egress proxy, curl inside a running sandbox reaches an allowed host; after
// PUT .../network from outside drops that host, the same curl is refused.
func TestNetworkChangeReachesRunningSandbox(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireLinux(t)
	testutil.RequireBinary(t, "curl")
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok from "+r.Host)
	}))
	defer web.Close()
	webAddr := netip.MustParseAddrPort(strings.TrimPrefix(web.URL, "http://"))
	// Names resolve to a public documentation-free address that the SSRF
	// guard accepts; the dialer then reaches the local test server.
	public := netip.MustParseAddr("93.184.216.34")

	dir := t.TempDir()
	// A cgroup parent of this process only: the server's start sweeps its
	// parent (Cleanup), which killed the sandboxes of this same test run
	// at once by another process (CI's run beside a developer's).
	parent := fmt.Sprintf("airlock-servertest-%d", os.Getpid())
	t.Cleanup(func() {
		// backend.Open names the native backend's parent PARENT-native.
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent + "-*")
		top, _ := filepath.Glob("/sys/fs/cgroup/" + parent + "-*")
		for _, d := range append(dirs, top...) {
			os.Remove(d) // empty once the server destroyed its sandboxes
		}
	})
	b, err := backend.Open("native", backend.Options{
		AgentBinary: testutil.AirlockBinary(t), StateDir: filepath.Join(dir, "backends"),
		CgroupParent: parent,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := b.Probe(context.Background()); !p.Available {
		testutil.Skip(t, "native backend unavailable: "+p.Reason)
	}
	ts := newTestServer(t, func(c *Config) {
		c.Backends = map[string]sandbox.Backend{"native": b}
		c.DefaultBackend = "native"
		c.Policies = admission.HostPolicies{}
		c.CABundle = nil
		c.EgressConfig = func(ec *egress.Config) {
			ec.Resolver = egress.StaticResolver{"web.test": {public}, "other.test": {public}}
			ec.Dial = func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, webAddr.String())
			}
		}
	})
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: []byte(`{"network":{"mode":"allowlist","allow":["web.test:80"]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	curl := func(host string) string {
		t.Helper()
		r, err := c.Run(ctx, sb.ID, "sh", "-c", "curl -sS --max-time 10 http://"+host+"/ 2>&1; echo \" exit=$?\"")
		if err != nil {
			t.Fatal(err)
		}
		return string(r.Stdout)
	}
	if out := curl("web.test"); !strings.HasPrefix(out, "ok from web.test") {
		t.Fatalf("allowed host before the change: %q", out)
	}
	if out := curl("other.test"); strings.Contains(out, "ok from") {
		t.Fatalf("host not allowed yet was reached: %q", out)
	}
	if err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Allow: []string{"other.test:80"}}); err != nil {
		t.Fatal(err)
	}
	if out := curl("web.test"); strings.Contains(out, "ok from") {
		t.Fatalf("host dropped from the rules still reached: %q", out)
	}
	if out := curl("other.test"); !strings.HasPrefix(out, "ok from other.test") {
		t.Fatalf("newly allowed host: %q", out)
	}
	evs, err := c.Events(ctx, sb.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var egressEvents, policyEvents int
	for _, e := range evs {
		switch e.Type {
		case "egress":
			egressEvents++
		case "policy":
			policyEvents++
		}
	}
	if egressEvents < 4 || policyEvents < 1 {
		t.Fatalf("events: %d egress, %d policy", egressEvents, policyEvents)
	}
}
