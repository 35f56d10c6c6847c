package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
)

func TestWarmPool(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) {
		c.Pools = []PoolConfig{{Backend: "fake", Profile: "default", Size: 3}}
	})
	ctx := context.Background()
	eventually(t, "pool filled", func() bool { return len(ts.fake.Live()) == 3 })
	// A slow backend from now on: a pooled create does not wait for it.
	ts.fake.CreateDelay = 50 * time.Millisecond

	a, b := ts.tenant(t, "alice"), ts.tenant(t, "bob")
	sa, err := a.Create(ctx, api.CreateSandboxRequest{Env: map[string]string{"WHO": "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if !sa.Pooled {
		t.Fatal("first create did not come from the pool")
	}
	// Per-sandbox env still applies to a pooled sandbox.
	r, err := a.Run(ctx, sa.ID, "printenv", "WHO")
	if err != nil || string(r.Stdout) != "alice\n" {
		t.Fatalf("env in pooled sandbox: %v %+v", err, r)
	}
	// Leave state behind, then delete: the sandbox is destroyed, never
	// returned to the pool.
	if err := a.WriteFile(ctx, sa.ID, "/tmp/secret", strings.NewReader("alice's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, sa.ID); err != nil {
		t.Fatal(err)
	}
	// Many concurrent creates: every ID distinct, never alice's.
	var mu sync.Mutex
	seen := map[string]bool{sa.ID: true}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := b.Create(ctx, api.CreateSandboxRequest{})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[sb.ID] {
				t.Errorf("sandbox %s handed out twice", sb.ID)
			}
			seen[sb.ID] = true
			rc, err := b.ReadFile(ctx, sb.ID, "/tmp/secret")
			if err == nil {
				data, _ := io.ReadAll(rc)
				rc.Close()
				t.Errorf("bob's sandbox %s holds alice's file: %q", sb.ID, data)
			}
		}()
	}
	wg.Wait()
	// Replenished in the background.
	eventually(t, "pool replenished", func() bool {
		return ts.srv.pools[poolKey{backend: "fake", profile: "default"}].readyCount() == 3
	})
	// An inline policy never comes from the pool.
	sc, err := b.Create(ctx, api.CreateSandboxRequest{Policy: []byte(`{"limits":{"pids":64}}`)})
	if err != nil || sc.Pooled {
		t.Fatalf("inline policy create: %v pooled=%v", err, sc != nil && sc.Pooled)
	}
	if l, err := b.List(ctx, client.ListOptions{}); err != nil || len(l) != 9 {
		t.Fatalf("bob has %d sandboxes (%v), want 9", len(l), err)
	}
}

func TestReconcileAfterCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// What a crashed server left: rows marked running.
	for _, id := range []string{"sb-a", "sb-b"} {
		if err := st.InsertSandbox(ctx, &store.Record{ID: id, Tenant: "t", Backend: "fake", Spec: []byte("{}"), State: store.StateRunning, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	ts := newTestServerWithStore(t, dir, st)
	// Leftovers the backend still had are cleaned (nothing is kept).
	if live := ts.fake.Live(); len(live) != 0 {
		t.Fatalf("backend leftovers after reconcile: %v", live)
	}
	for _, id := range []string{"sb-a", "sb-b"} {
		r, err := st.GetSandbox(ctx, "t", id)
		if err != nil || r.State != store.StateStopped || r.Reason != "server restarted" {
			t.Fatalf("%s after restart: %v %+v", id, err, r)
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, sb.ID, "true"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, sb.ID, "violate"); err != nil {
		t.Fatal(err)
	}
	c.Get(ctx, "sb-missing")
	resp, body := rawDo(t, ts, "GET", "/metrics", "", nil)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// What the server exposes is what the reference parser reads.
	p := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := p.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
		t.Fatalf("the reference parser refuses /metrics: %v\n%s", err, body)
	}
	for _, want := range []string{
		`airlock_sandboxes{backend="fake",state="running"} 1`,
		`airlock_create_seconds_count{backend="fake",pooled="false"} 1`,
		`airlock_exec_seconds_count{backend="fake"} 2`,
		`airlock_violations_total{backend="fake"} 1`,
		`airlock_api_errors_total{code="not_found"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	resp, body = rawDo(t, ts, "GET", "/healthz", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"fake"`) {
		t.Fatalf("healthz: %s %s", resp.Status, body)
	}
}

func TestShutdownDestroysEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := newTestServerOpts(t, dir, st, nil, func(c *Config) {
		c.Pools = []PoolConfig{{Backend: "fake", Size: 2}}
	})
	c := ts.local(t)
	eventually(t, "pool filled", func() bool { return len(ts.fake.Live()) == 2 })
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { ts.srv.Shutdown(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown hangs with a running background process")
	}
	if live := ts.fake.Live(); len(live) != 0 {
		t.Fatalf("sandboxes left after shutdown: %v", live)
	}
	r, err := st.GetSandbox(ctx, store.LocalTenant, sb.ID)
	if err != nil || r.State != store.StateStopped || r.Reason != "server shutdown" {
		t.Fatalf("store after shutdown: %v %+v", err, r)
	}
}

func TestPoolReplacesDeadSandbox(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.Pools = []PoolConfig{{Backend: "fake", Size: 2}} })
	eventually(t, "pool filled", func() bool { return len(ts.fake.Live()) == 2 })
	dead := ts.fake.Live()[0]
	ts.fake.Kill(dead)
	eventually(t, "dead pooled sandbox replaced", func() bool {
		live := ts.fake.Live()
		return len(live) == 2 && live[0] != dead && live[1] != dead
	})
	sb, err := ts.local(t).Create(context.Background(), api.CreateSandboxRequest{})
	if err != nil || !sb.Pooled || sb.ID == dead {
		t.Fatalf("create after a pooled sandbox died: %v %+v", err, sb)
	}
}

func TestRetentionPrunesStoppedSandboxes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *Config) { c.Retention = time.Hour })
	c := ts.local(t)
	ctx := context.Background()
	old, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	running, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	ts.srv.events.flush()
	ts.srv.prune(time.Now()) // within retention: kept
	if _, err := c.Get(ctx, old.ID); err != nil {
		t.Fatalf("pruned too early: %v", err)
	}
	ts.srv.prune(time.Now().Add(2 * time.Hour))
	if _, err := c.Get(ctx, old.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("stopped sandbox past retention: %v", err)
	}
	if evs, err := ts.store.Events(ctx, old.ID, 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("events of a pruned sandbox: %v %d", err, len(evs))
	}
	if g, err := c.Get(ctx, running.ID); err != nil || g.State != "running" {
		t.Fatalf("running sandbox pruned: %v %+v", err, g)
	}
}
