package server

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxfake"
	"github.com/airlock-dev/airlock/server/admission"
	"github.com/airlock-dev/airlock/server/store"
)

// testPolicies resolves without touching the host: the fake backend only
// needs a policy object.
type testPolicies struct{}

func (testPolicies) ParseRaw(data []byte) (*policy.Policy, error) {
	return admission.HostPolicies{}.ParseRaw(data)
}

func (testPolicies) Resolve(raw *policy.Policy, profile, workspace, rootfs string) (*policy.Policy, error) {
	return admission.HostPolicies{}.Resolve(raw, profile, workspace, rootfs)
}

type testServer struct {
	srv    *Server
	store  *store.Store
	fake   *sandboxfake.Backend
	socket string
	tcp    string // http://127.0.0.1:port (needs a key)
	dir    string
}

func newTestServer(t testing.TB, mod func(*Config)) *testServer {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newTestServerOpts(t, dir, st, nil, mod)
}

// newTestServerWithStore starts a server on an existing store whose fake
// backend still holds a leftover sandbox from "before the crash".
func newTestServerWithStore(t *testing.T, dir string, st *store.Store) *testServer {
	fake := sandboxfake.New("fake")
	if _, err := fake.Create(context.Background(), sandbox.Spec{ID: "sb-a", Policy: &policy.Policy{}}); err != nil {
		t.Fatal(err)
	}
	return newTestServerOpts(t, dir, st, fake, nil)
}

func newTestServerOpts(t testing.TB, dir string, st *store.Store, fake *sandboxfake.Backend, mod func(*Config)) *testServer {
	t.Helper()
	ctx := context.Background()
	if fake == nil {
		fake = sandboxfake.New("fake")
	}
	cfg := Config{
		Backends:       map[string]sandbox.Backend{"fake": fake},
		DefaultBackend: "fake",
		Store:          st,
		Policies:       testPolicies{},
		DataDir:        dir,
		ReapInterval:   20 * time.Millisecond,
		CABundle:       []byte{},
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "airlock.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(uln, true)
	go srv.Serve(tln, false)
	ts := &testServer{srv: srv, store: st, fake: fake, socket: sock, tcp: "http://" + tln.Addr().String(), dir: dir}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return ts
}

// local returns a client on the trusted unix socket (tenant "local").
func (ts *testServer) local(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New("unix://" + ts.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// tenantKey returns a TCP client with key (already stored).
func (ts *testServer) tenantKey(t *testing.T, key string) *client.Client {
	t.Helper()
	c, err := client.New(ts.tcp, client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// tenant returns a TCP client with a fresh key of tenant.
func (ts *testServer) tenant(t *testing.T, tenant string) *client.Client {
	t.Helper()
	key := store.KeyPrefix + tenant + "-" + newID("")
	if _, err := ts.store.AddKey(context.Background(), tenant, "test", key); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ts.tcp, client.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// key adds an API key of tenant to the store and returns it.
func (ts *testServer) key(t *testing.T, tenant string) string {
	key := store.KeyPrefix + tenant + "-" + newID("")
	if _, err := ts.store.AddKey(context.Background(), tenant, "test", key); err != nil {
		t.Fatal(err)
	}
	return key
}
