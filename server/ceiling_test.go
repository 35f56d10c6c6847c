package server

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/server/admission"
)

// TestCeilingRefusesWhatTheRedTeamAsked replays the requests of issue 11
// over an API key: each is refused with 403 naming the ceiling, and the
// same request on the trusted socket (the operator) is not bounded.
func TestCeilingRefusesWhatTheRedTeamAsked(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.tenant(t, "acme")
	ctx := context.Background()
	refused := []struct{ name, policy, ceiling string }{
		{"loopback CIDR", `{"network":{"mode":"allowlist","allow":["127.0.0.1/32"]}}`, "network.allow"},
		{"two /1 halves", `{"network":{"mode":"open","allow":["0.0.0.0/1","128.0.0.0/1"]}}`, "network.allow"},
		{"metadata", `{"network":{"mode":"allowlist","allow":["169.254.169.254"]}}`, "network.allow"},
		{"private /8 inside a public-looking /4", `{"network":{"mode":"allowlist","allow":["0.0.0.0/4"]}}`, "network.allow"},
		{"IPv6 everything", `{"network":{"mode":"allowlist","allow":["::/0"]}}`, "network.allow"},
		{"IPv4-mapped", `{"network":{"mode":"allowlist","allow":["::ffff:0:0/96"]}}`, "network.allow"},
		{"no pids limit", `{"limits":{"pids":0}}`, "limits.unlimited"},
		{"no memory limit", `{"limits":{"memory":"unlimited"}}`, "limits.unlimited"},
		{"no cpu limit", `{"limits":{"cpus":0}}`, "limits.unlimited"},
		{"no disk limit", `{"limits":{"disk":0}}`, "limits.unlimited"},
		{"no open files limit", `{"limits":{"open_files":0}}`, "limits.unlimited"},
		{"memory 2^62", `{"limits":{"memory":4611686018427387904}}`, "limits.max.memory"},
		{"too many descriptors", `{"limits":{"pids":2048,"open_files":16384}}`, "limits.open_files_total"},
	}
	for _, tc := range refused {
		_, err := c.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(tc.policy)})
		if !errors.Is(err, errdefs.ErrPermission) || !strings.Contains(err.Error(), "ceiling "+tc.ceiling) {
			t.Errorf("%s: %s: got %v, want a 403 naming ceiling %s", tc.name, tc.policy, err, tc.ceiling)
		}
	}
	if n := len(ts.fake.Live()); n != 0 {
		t.Fatalf("refused creates left %d sandboxes", n)
	}
	// A public CIDR and names are fine; so is the default.
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"allowlist","allow":["8.8.8.0/24","example.com"]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	// PUT .../network is held to the same ceiling.
	for _, allow := range [][]string{{"0.0.0.0/1", "128.0.0.0/1"}, {"127.0.0.0/8"}, {"169.254.169.254/32"}} {
		err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "open", Allow: allow})
		if !errors.Is(err, errdefs.ErrPermission) || !strings.Contains(err.Error(), "ceiling network.allow") {
			t.Errorf("PUT network %v: got %v, want 403 naming the ceiling", allow, err)
		}
	}
	if err := c.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Allow: []string{"1.1.1.1"}}); err != nil {
		t.Errorf("PUT network to a public address: %v", err)
	}
	// The operator on the socket is not bounded.
	if _, err := ts.local(t).Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits":{"pids":0},"network":{"mode":"allowlist","allow":["127.0.0.1/32"]}}`)}); err != nil {
		t.Errorf("trusted socket: %v", err)
	}
}

func TestCeilingsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ceilings.yaml")
	os.WriteFile(file, []byte(`
default:
  network: {modes: [none, allowlist]}
  limits:
    max: {memory: 1Gi, pids: 100}
    default: {memory: 256Mi, pids: 50, open_files: 64}
  backends: [fake]
  profiles: [default]
tenants:
  trusted-ci:
    network: {allow: [10.1.0.0/16]}
    limits: {max: {memory: 2Gi}, default: {memory: 512Mi}, unlimited: [pids, cpus, timeout, output_bytes, disk, open_files]}
`), 0o644)
	ceil, err := admission.LoadCeilings(file)
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(c *Config) { c.Ceilings = ceil })
	ctx := context.Background()
	acme := ts.tenant(t, "acme")
	for _, tc := range []struct {
		req     api.CreateSandboxRequest
		ceiling string
	}{
		{api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"open"}}`)}, "network.modes"},
		{api.CreateSandboxRequest{Profile: "strict"}, "profiles"},
		{api.CreateSandboxRequest{Policy: json.RawMessage(`{"limits":{"memory":"2Gi"}}`)}, "limits.max.memory"},
		{api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"allowlist","allow":["10.1.2.3"]}}`)}, "network.allow"},
	} {
		if _, err := acme.Create(ctx, tc.req); !errors.Is(err, errdefs.ErrPermission) || !strings.Contains(err.Error(), "ceiling "+tc.ceiling) {
			t.Errorf("%+v: got %v, want 403 naming %s", tc.req, err, tc.ceiling)
		}
	}
	sb, err := acme.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var pol struct {
		Limits struct {
			Memory    int64 `json:"memory"`
			Pids      int   `json:"pids"`
			OpenFiles int   `json:"open_files"`
		} `json:"limits"`
	}
	json.Unmarshal(sb.Policy, &pol)
	if pol.Limits.Memory != 256<<20 || pol.Limits.Pids != 50 || pol.Limits.OpenFiles != 64 {
		t.Errorf("defaults not applied: %+v", pol.Limits)
	}
	ci := ts.tenant(t, "trusted-ci")
	if _, err := ci.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"allowlist","allow":["10.1.2.0/24"]},"limits":{"pids":0}}`)}); err != nil {
		t.Errorf("trusted-ci within its ceiling: %v", err)
	}
	if _, err := ci.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(`{"network":{"mode":"allowlist","allow":["10.0.0.0/8"]}}`)}); !errors.Is(err, errdefs.ErrPermission) {
		t.Errorf("trusted-ci wider than its exception: %v", err)
	}
	for _, bad := range []string{"default: {network: {modes: [wide]}}", "default: {network: {allow: [example.com]}}", "default: {limits: {unlimited: [fun]}}", "nonsense: 1"} {
		os.WriteFile(file, []byte(bad), 0o644)
		if _, err := admission.LoadCeilings(file); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("ceilings %q: got %v, want ErrInvalid", bad, err)
		}
	}
}

// TestCeilingAppliesToPools: a pooled sandbox beyond a tenant's ceiling
// is not handed to it (a cold one within the ceiling is made instead),
// while a tenant whose ceiling it fits gets it.
func TestCeilingAppliesToPools(t *testing.T) {
	t.Parallel()
	ceil := &admission.Ceilings{Default: admission.DefaultCeiling(), Tenants: map[string]admission.Ceiling{}}
	small := admission.DefaultCeiling()
	small.Limits.Max.Memory = 256 << 20
	ceil.Tenants["small"] = small
	ts := newTestServer(t, func(c *Config) {
		c.Ceilings = ceil
		c.Pools = []PoolConfig{{Backend: "fake", Profile: "default", Size: 2}}
	})
	eventually(t, "pool filled", func() bool { return len(ts.fake.Live()) == 2 })
	ctx := context.Background()
	sb, err := ts.tenant(t, "small").Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var pol struct {
		Limits struct {
			Memory int64 `json:"memory"`
		} `json:"limits"`
	}
	json.Unmarshal(sb.Policy, &pol)
	if sb.Pooled || pol.Limits.Memory != 256<<20 {
		t.Fatalf("tenant small got pooled=%v memory=%d, want a cold sandbox at its 256 MiB ceiling", sb.Pooled, pol.Limits.Memory)
	}
	if sb, err := ts.tenant(t, "big").Create(ctx, api.CreateSandboxRequest{}); err != nil || !sb.Pooled {
		t.Fatalf("tenant within the default ceiling: %v pooled=%v", err, sb != nil && sb.Pooled)
	}
}

// TestCeilingRequestRules: a keyed tenant may narrow the ceiling's request
// rules but not widen them, and its sandboxes carry the ceiling's rules as
// bounds the egress proxy enforces whatever the tenant's own rules say.
func TestCeilingRequestRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ceilings.yaml")
	os.WriteFile(file, []byte(`
default:
  network:
    requests:
      - {host: github.com, methods: [GET, HEAD], path: "/**"}
      - {host: github.com, methods: [GET], path: /acme/*/info/refs, query: {service: git-receive-pack}}
      - {host: github.com, methods: [POST], path: /acme/*/git-receive-pack}
      - {host: github.com, methods: [POST], path: /**/git-upload-pack}
`), 0o644)
	ceil, err := admission.LoadCeilings(file)
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(c *Config) { c.Ceilings = ceil })
	ctx := context.Background()
	acme := ts.tenant(t, "acme")
	for _, pol := range []string{
		`{"network":{"mode":"allowlist","requests":[{"host":"github.com","methods":["POST"],"path":"/**"}]}}`,
		`{"network":{"mode":"allowlist","requests":[{"host":"github.com","path":"/acme/**"}]}}`,
		`{"network":{"mode":"allowlist","git":{"push":["github.com/*/*"]}}}`,
	} {
		if _, err := acme.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(pol)}); !errors.Is(err, errdefs.ErrPermission) || !strings.Contains(err.Error(), "ceiling network.requests") {
			t.Errorf("%s: got %v, want 403 naming ceiling network.requests", pol, err)
		}
	}
	sb, err := acme.Create(ctx, api.CreateSandboxRequest{Policy: json.RawMessage(
		`{"network":{"mode":"allowlist","requests":[{"host":"github.com","methods":["GET"],"path":"/acme/**"}],"git":{"push":["github.com/acme/tool"]}}}`)})
	if err != nil {
		t.Fatalf("narrower rules: %v", err)
	}
	if !strings.Contains(string(sb.Policy), `"bounds"`) || !strings.Contains(string(sb.Policy), "git-receive-pack") {
		t.Errorf("sandbox policy lacks the ceiling's bounds: %s", sb.Policy)
	}
	// PUT .../network with request rules is held to the same ceiling.
	wide := []api.RequestRule{{Host: "github.com", Methods: []string{"POST"}, Path: "/**"}}
	if err := acme.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Requests: &wide}); !errors.Is(err, errdefs.ErrPermission) || !strings.Contains(err.Error(), "ceiling network.requests") {
		t.Errorf("PUT widening request rules: got %v, want 403 naming ceiling network.requests", err)
	}
	narrow := []api.RequestRule{{Host: "github.com", Methods: []string{"GET"}, Path: "/acme/tool/**"}}
	if err := acme.SetNetwork(ctx, sb.ID, api.NetworkRequest{Mode: "allowlist", Requests: &narrow}); err != nil {
		t.Errorf("PUT narrower request rules: %v", err)
	}
}
