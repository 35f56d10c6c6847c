package microvm

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend/internal/backendtest"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestEgressProgramRules: in a microVM, as on native, a request rule that
// names curl lets curl through (the guest's agent names the program
// behind the connection) and refuses python3 and a copy of curl made in
// the workspace. Without the rule (the proof), both reach the server.
func TestEgressProgramRules(t *testing.T) {
	b := testBackend(t, false)
	port := backendtest.HelloServer(t)
	network := func(programs ...string) policy.Network {
		return policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)},
			Requests: []policy.RequestRule{{Host: "web.test", Methods: []string{"GET"}, Programs: programs}}}
	}
	pol := testPolicy(t, workspace(t), false)
	pol.Network = network()
	rec := &backendtest.Events{}
	id := "egp-" + randID()
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
	u := fmt.Sprintf("http://web.test:%d/x", port)
	clients := map[string]string{
		"curl":         "curl -sS --max-time 20 -o /dev/null -w '%{http_code}' " + u,
		"copy of curl": "cp $(command -v curl) ./curl2 && ./curl2 -sS --max-time 20 -o /dev/null -w '%{http_code}' " + u,
		"python3":      "python3 -c \"import urllib.request as u\ntry: print(u.urlopen('" + u + "').status, end='')\nexcept Exception as e: print(e.code, end='')\"",
	}
	for _, name := range []string{"curl", "copy of curl", "python3"} {
		if _, code := sh(t, sb, clients[name]); code != "200" {
			t.Fatalf("without a program rule %s got %q, want 200 (the proof)", name, code)
		}
	}
	if err := px.SetNetwork(network("curl")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ client, code string }{{"curl", "200"}, {"copy of curl", "403"}, {"python3", "403"}} {
		_, code := sh(t, sb, clients[tc.client])
		prog := rec.LastProgram()
		if code != tc.code {
			t.Errorf("programs [curl], %s: %q (program %q), want %s", tc.client, code, prog, tc.code)
		}
		if tc.client == "curl" && !(strings.HasPrefix(prog, "/") && strings.HasSuffix(prog, "/curl")) {
			t.Errorf("programs [curl], curl passed as %q, want curl's path", prog)
		}
	}
}

// TestEgressGitPreset: real git in the guest clones through the git preset
// and pushes only where it names (backendtest.GitThroughRules).
func TestEgressGitPreset(t *testing.T) {
	b := testBackend(t, false)
	pol := testPolicy(t, workspace(t), false)
	backendtest.GitThroughRules(t, pol, func(spec sandbox.Spec) sandbox.Sandbox { return create(t, b, spec) })
}
