package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/admission"
)

// TestImagePoolNetworkFailsClosedNative is TestImagePoolNetworkFailsClosed
// on the real native backend: a warm sandbox of a template whose network
// cannot be set at hand-out ends (its processes gone), and the create is
// answered by a cold sandbox carrying the network asked for, never by the
// warm one.
func TestImagePoolNetworkFailsClosedNative(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireLinux(t)
	b := openNative(t)
	ts := newTestServer(t, func(c *Config) {
		withImages(t)(c)
		c.Backends = map[string]sandbox.Backend{"native": b}
		c.DefaultBackend = "native"
		c.Policies = admission.HostPolicies{}
		c.CABundle = nil
		c.PoolDemand = 1
		c.applyNetwork = func(l *live, n policy.Network) error {
			return fmt.Errorf("set network of %q: refused for the test: %w", l.sb.ID(), errdefs.ErrUnavailable)
		}
	})
	ctx := context.Background()
	importBase(t, ts, "1")
	alice := ts.tenant(t, "alice")
	first, err := alice.Create(ctx, e2bShape(`{"mode":"open"}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Delete(ctx, first.ID)
	var warm *live
	eventually(t, "pool filled", func() bool {
		for _, p := range imagePoolsOf(ts) {
			p.mu.Lock()
			if len(p.ready) == 1 {
				warm = p.ready[0].l
			}
			p.mu.Unlock()
		}
		return warm != nil
	})
	select {
	case <-warm.sb.Done():
		t.Fatal("the warm sandbox ended before the hand-out")
	default:
	}
	sb, err := alice.Create(ctx, e2bShape(`{"mode":"allowlist"}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Delete(ctx, sb.ID)
	if sb.Pooled || sb.ID == warm.sb.ID() {
		t.Fatalf("handed out the warm sandbox %s whose network could not be set", warm.sb.ID())
	}
	select {
	case <-warm.sb.Done():
	case <-time.After(2 * time.Minute): // hang guard only
		t.Fatalf("warm sandbox %s still running after its failed hand-out", warm.sb.ID())
	}
	ts.srv.mu.Lock()
	got := ts.srv.live[sb.ID].proxy.Network()
	ts.srv.mu.Unlock()
	if got.Mode != policy.NetworkAllowlist || len(got.Allow) != 0 {
		t.Fatalf("cold sandbox's network %+v, want a deny-all allowlist as asked", got)
	}
	if r, err := alice.Run(ctx, sb.ID, "true"); err != nil || r.Code != 0 {
		t.Fatalf("cold sandbox does not run: %v %+v", err, r)
	}
}

// openNative opens the native backend under a cgroup parent of this test
// process only, removed at the end.
func openNative(t *testing.T) sandbox.Backend {
	t.Helper()
	parent := fmt.Sprintf("airlock-servertest-%d-%s", os.Getpid(), t.Name())
	t.Cleanup(func() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent + "-*")
		top, _ := filepath.Glob("/sys/fs/cgroup/" + parent + "-*")
		for _, d := range append(dirs, top...) {
			os.Remove(d)
		}
	})
	b, err := backend.Open("native", backend.Options{
		AgentBinary: testutil.AirlockBinary(t), StateDir: filepath.Join(t.TempDir(), "backends"), CgroupParent: parent,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := b.Probe(context.Background()); !p.Available {
		testutil.Skip(t, "native backend unavailable: "+p.Reason)
	}
	return b
}
