package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/airlock-dev/airlock/server/store"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/policy"
)

const poolImage = "airlock-test/base:1"

// e2bShape is the create E2B's door makes: an image and a network.
func e2bShape(net string, env map[string]string) api.CreateSandboxRequest {
	return api.CreateSandboxRequest{Image: poolImage, Policy: json.RawMessage(`{"network":` + net + `}`), Env: env,
		Labels: map[string]string{"who": fmt.Sprint(env["WHO"])}}
}

// imagePoolsOf lists the server's image pools.
func imagePoolsOf(ts *testServer) []*pool {
	ts.srv.mu.Lock()
	defer ts.srv.mu.Unlock()
	var out []*pool
	for _, p := range ts.srv.pools {
		if p.img.name != "" {
			out = append(out, p)
		}
	}
	return out
}

// importBase imports a busybox image as poolImage (label v makes it another image).
func importBase(t testing.TB, ts *testServer, v string) string {
	t.Helper()
	img, err := mutate.Config(imagestest.Busybox(t), v1.Config{Labels: map[string]string{"v": v}, Cmd: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tg, _ := name.NewTag(poolImage)
	if err := tarball.Write(tg, img, &buf); err != nil {
		t.Fatal(err)
	}
	ims, err := ts.local(t).ImportImage(context.Background(), &buf, "")
	if err != nil {
		t.Fatal(err)
	}
	return ims[0].ID
}

func TestImagePoolOnDemand(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		withImages(t)(c)
		c.PoolDemand = 2
	})
	ctx := context.Background()
	first := importBase(t, ts, "1")
	alice, bob := ts.tenant(t, "alice"), ts.tenant(t, "bob")
	// The first create of a kind is cold and starts its pool.
	sa, err := alice.Create(ctx, e2bShape(`{"mode":"open"}`, map[string]string{"WHO": "alice"}))
	if err != nil || sa.Pooled {
		t.Fatalf("first create: %v pooled=%v", err, sa != nil && sa.Pooled)
	}
	eventually(t, "pool filled", func() bool { return len(ts.fake.Live()) == 3 })
	// Warm sandboxes are nobody's: bob, allowed one sandbox, still gets one.
	if err := ts.store.SetQuota(ctx, "bob", store.Quota{MaxSandboxes: 1}); err != nil {
		t.Fatal(err)
	}
	sb, err := bob.Create(ctx, e2bShape(`{"mode":"allowlist","allow":["example.com"]}`, map[string]string{"WHO": "bob"}))
	if err != nil || !sb.Pooled {
		t.Fatalf("second create: %v pooled=%v", err, sb != nil && sb.Pooled)
	}
	// It carries exactly bob's network, in the proxy and in its record.
	ts.srv.mu.Lock()
	got := ts.srv.live[sb.ID].proxy.Network()
	ts.srv.mu.Unlock()
	if got.Mode != policy.NetworkAllowlist || !slices.Equal(got.Allow, []string{"example.com"}) {
		t.Fatalf("pooled sandbox network: %+v", got)
	}
	var view struct{ Network policy.Network }
	if err := json.Unmarshal(sb.Policy, &view); err != nil || view.Network.Mode != policy.NetworkAllowlist || !slices.Equal(view.Network.Allow, []string{"example.com"}) {
		t.Fatalf("pooled sandbox policy view: %s %v", sb.Policy, err)
	}
	if r, err := bob.Run(ctx, sb.ID, "printenv", "WHO"); err != nil || string(r.Stdout) != "bob\n" {
		t.Fatalf("env of pooled sandbox: %v %+v", err, r)
	}
	// ... and the tenant's quota applies at hand-out.
	if _, err := bob.Create(ctx, e2bShape(`{"mode":"open"}`, nil)); !errors.Is(err, errdefs.ErrLimit) {
		t.Fatalf("bob's second sandbox: %v, want a limit error", err)
	}
	// Another kind of create (limits of its own) is not served from it.
	other := e2bShape(`{"mode":"open"}`, nil)
	other.Policy = json.RawMessage(`{"network":{"mode":"open"},"limits":{"pids":77}}`)
	if so, err := alice.Create(ctx, other); err != nil || so.Pooled {
		t.Fatalf("create of another kind: %v pooled=%v", err, so != nil && so.Pooled)
	}
	// The image replaced under its name: no pooled sandbox of the old one
	// is handed out; the pool refills with the new one.
	second := importBase(t, ts, "2")
	if first == second {
		t.Fatal("the second import is the same image")
	}
	eventually(t, "pool refilled with the new image", func() bool {
		for _, p := range imagePoolsOf(ts) {
			if p.key.shape != imagePoolKey(&createPlan{raw: mustRaw(t, `{"network":{"mode":"open"}}`), backend: ts.fake, image: poolImage}, "default").shape {
				continue
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, it := range p.ready {
				if it.l.image.Image.ID != second {
					return false
				}
			}
			return len(p.ready) == p.size
		}
		return false
	})
	s3, err := alice.Create(ctx, e2bShape(`{"mode":"open"}`, nil))
	if err != nil || !s3.Pooled {
		t.Fatalf("create after replacement: %v pooled=%v", err, s3 != nil && s3.Pooled)
	}
	ts.srv.mu.Lock()
	img := ts.srv.live[s3.ID].image.Image.ID
	ts.srv.mu.Unlock()
	if img != second {
		t.Fatalf("pooled sandbox of image %s, want the current %s", img, second)
	}
	// The image removed: its demand pools go, with their sandboxes.
	if _, err := ts.local(t).RemoveImage(ctx, poolImage); err != nil {
		t.Fatal(err)
	}
	if n := len(imagePoolsOf(ts)); n != 0 {
		t.Fatalf("%d image pools left after the image was removed", n)
	}
}

func mustRaw(t *testing.T, s string) *policy.Policy {
	t.Helper()
	p, err := testPolicies{}.ParseRaw(withVersion(json.RawMessage(s)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestImagePoolBounds(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		withImages(t)(c)
		c.PoolDemand, c.PoolMax, c.PoolTenantMax = 2, 3, 2
	})
	ctx := context.Background()
	importBase(t, ts, "1")
	alice, bob := ts.tenant(t, "alice"), ts.tenant(t, "bob")
	kind := func(pids int) api.CreateSandboxRequest {
		r := e2bShape(`{"mode":"open"}`, nil)
		r.Policy = json.RawMessage(fmt.Sprintf(`{"network":{"mode":"open"},"limits":{"pids":%d}}`, pids))
		return r
	}
	if _, err := alice.Create(ctx, kind(100)); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Create(ctx, kind(101)); err != nil { // alice is at her bound: no pool
		t.Fatal(err)
	}
	if _, err := bob.Create(ctx, kind(102)); err != nil { // one left in all
		t.Fatal(err)
	}
	sizes := map[string]int{}
	for _, p := range imagePoolsOf(ts) {
		sizes[p.img.tenant] += p.size
	}
	if sizes["alice"] != 2 || sizes["bob"] != 1 || len(sizes) != 2 {
		t.Fatalf("demand pool sizes by tenant %v, want alice 2 (her bound), bob 1 (the total's rest)", sizes)
	}
	eventually(t, "pools filled", func() bool { return len(ts.fake.Live()) == 3+3 })
}

// A pooled sandbox whose network cannot be set at hand-out is destroyed,
// never handed out; the create is made cold instead.
func TestImagePoolNetworkFailsClosed(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		withImages(t)(c)
		c.PoolDemand = 1
		c.applyNetwork = func(l *live, n policy.Network) error {
			return fmt.Errorf("set network of %q: refused for the test: %w", l.sb.ID(), errdefs.ErrUnavailable)
		}
	})
	ctx := context.Background()
	importBase(t, ts, "1")
	alice := ts.tenant(t, "alice")
	if _, err := alice.Create(ctx, e2bShape(`{"mode":"open"}`, nil)); err != nil {
		t.Fatal(err)
	}
	var warm string
	eventually(t, "pool filled", func() bool {
		for _, p := range imagePoolsOf(ts) {
			p.mu.Lock()
			if len(p.ready) == 1 {
				warm = p.ready[0].l.sb.ID()
			}
			p.mu.Unlock()
		}
		return warm != ""
	})
	sb, err := alice.Create(ctx, e2bShape(`{"mode":"allowlist"}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	if sb.Pooled || sb.ID == warm {
		t.Fatalf("handed out the pooled sandbox %s whose network could not be set", warm)
	}
	eventually(t, "the pooled sandbox destroyed", func() bool { return !slices.Contains(ts.fake.Live(), warm) })
}

// A demand pool not taken from for PoolIdle is retired with its warm
// sandboxes; one taken from within the period stays. The sweep is called
// with a clock moved past the period (no waiting).
func TestImagePoolIdleRetired(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		withImages(t)(c)
		c.PoolDemand, c.PoolIdle = 1, time.Hour
	})
	ctx := context.Background()
	importBase(t, ts, "1")
	alice := ts.tenant(t, "alice")
	if _, err := alice.Create(ctx, e2bShape(`{"mode":"open"}`, nil)); err != nil {
		t.Fatal(err)
	}
	var warm string
	eventually(t, "demand pool filled", func() bool {
		for _, p := range imagePoolsOf(ts) {
			p.mu.Lock()
			if len(p.ready) == 1 {
				warm = p.ready[0].l.sb.ID()
			}
			p.mu.Unlock()
		}
		return warm != ""
	})
	ps := imagePoolsOf(ts)
	if len(ps) != 1 {
		t.Fatalf("%d image pools, want the one started on demand", len(ps))
	}
	p := ps[0]
	p.mu.Lock()
	used := p.img.used
	p.mu.Unlock()
	ts.srv.sweepPools(used.Add(30 * time.Minute)) // within the period: kept
	if n := len(imagePoolsOf(ts)); n != 1 || !slices.Contains(ts.fake.Live(), warm) {
		t.Fatalf("pool retired before its idle period: %d pools, warm sandbox live %v", n, slices.Contains(ts.fake.Live(), warm))
	}
	ts.srv.sweepPools(used.Add(time.Hour + time.Second))
	if n := len(imagePoolsOf(ts)); n != 0 {
		t.Fatalf("%d image pools after the idle period, want none", n)
	}
	eventually(t, "the warm sandbox destroyed", func() bool { return !slices.Contains(ts.fake.Live(), warm) })
	// The next create of that kind is cold again and starts a new pool.
	sb, err := alice.Create(ctx, e2bShape(`{"mode":"open"}`, nil))
	if err != nil || sb.Pooled {
		t.Fatalf("create after retirement: %v pooled=%v", err, sb != nil && sb.Pooled)
	}
	eventually(t, "a new demand pool", func() bool { return len(imagePoolsOf(ts)) == 1 })
}
