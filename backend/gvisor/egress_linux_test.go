package gvisor

import (
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend/internal/backendtest"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestEgressThroughProxy: with an allowlist, the agent's loopback listener
// inside gVisor tunnels to the host's egress proxy exactly as in the native
// backend; allowed names are reached, others refused.
func TestEgressThroughProxy(t *testing.T) {
	b := testBackend(t)
	port := backendtest.HelloServer(t)
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("unconfined request failed: %v", err)
	}
	network := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"web.test", fmt.Sprintf("127.0.0.1/32:%d", port)}}
	ws := workspace(t)
	pol := testPolicy(t, ws, func(p *policy.Policy) { p.Network = network })
	loop := netip.MustParseAddr("127.0.0.1")
	rec := &backendtest.Events{}
	id := newID(t)
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

// TestEgressRequestRules: request rules hold inside gVisor too (the same
// agent tunnel; plain proxy requests here): a matching GET passes, a POST
// and another path are refused with the proxy's 403.
func TestEgressRequestRules(t *testing.T) {
	b := testBackend(t)
	port := backendtest.HelloServer(t)
	network := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)},
		Requests: []policy.RequestRule{{Host: "web.test", Methods: []string{"GET"}, Path: "/ok/*"}}}
	ws := workspace(t)
	pol := testPolicy(t, ws, func(p *policy.Policy) { p.Network = network })
	rec := &backendtest.Events{}
	id := newID(t)
	px, err := egress.New(egress.Config{SandboxID: id, Network: pol.Network, Audit: rec,
		Resolver: egress.StaticResolver{"web.test": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := egress.SystemBundle()
	if err != nil {
		t.Fatal(err)
	}
	sb := create(t, b, sandbox.Spec{ID: id, Policy: pol, Egress: px, Env: px.SandboxEnv(), Files: px.SandboxFiles(bundle)})
	for _, tc := range []struct{ args, want string }{
		{"http://web.test:%d/ok/1", "200"},
		{"-X POST http://web.test:%d/ok/1", "403"},
		{"http://web.test:%d/secret", "403"},
		{"--path-as-is http://web.test:%d/ok/../secret", "403"},
	} {
		_, out := sh(t, sb, "curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "+fmt.Sprintf(tc.args, port))
		if out != tc.want {
			t.Errorf("curl %s: %q, want %s", tc.args, out, tc.want)
		}
	}
}

// TestEgressProgramRules: inside gVisor the agent names the program behind
// each proxy connection: a rule for curl lets curl through and refuses
// python3, a copy of curl in the workspace and curl's name given by argv[0]
// to another program.
func TestEgressProgramRules(t *testing.T) {
	b := testBackend(t)
	port := backendtest.HelloServer(t)
	network := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)},
		Requests: []policy.RequestRule{{Host: "web.test", Methods: []string{"GET"}, Programs: []string{"curl"}}}}
	ws := workspace(t)
	pol := testPolicy(t, ws, func(p *policy.Policy) { p.Network = network })
	id := newID(t)
	px, err := egress.New(egress.Config{SandboxID: id, Network: pol.Network, Audit: &backendtest.Events{},
		Resolver: egress.StaticResolver{"web.test": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	sb := create(t, b, sandbox.Spec{ID: id, Policy: pol, Egress: px, Env: px.SandboxEnv()})
	u := fmt.Sprintf("http://web.test:%d/x", port)
	code := " -sS --max-time 20 -o /dev/null -w '%{http_code}' " + u
	script := "import urllib.request as u\ntry: u.urlopen('" + u + "')\nexcept Exception as e: print(e.code, end='')\n"
	if err := os.WriteFile(filepath.Join(ws, "get.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, script, want string }{
		{"curl", "curl" + code, "200"},
		{"python3", "python3 " + ws + "/get.py", "403"},
		{"copy of curl", "cp $(command -v curl) " + ws + "/curl && " + ws + "/curl" + code, "403"},
		{"argv0 curl", "python3 -c 'import os, sys; os.execv(sys.executable, [\"curl\", \"" + ws + "/get.py\"])'", "403"},
	} {
		_, out := sh(t, sb, tc.script)
		if out != tc.want {
			t.Errorf("%s: %q, want %s", tc.name, out, tc.want)
		}
	}
}

// TestEgressGitPreset: real git inside gVisor clones through the git
// preset and pushes only where it names (backendtest.GitThroughRules).
func TestEgressGitPreset(t *testing.T) {
	b := testBackend(t)
	pol := testPolicy(t, workspace(t), nil)
	backendtest.GitThroughRules(t, pol, func(spec sandbox.Spec) sandbox.Sandbox { return create(t, b, spec) })
}
