package docker

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

// TestEgressProgramRules: on docker, as on native, a request rule that
// names curl lets curl through (the in-container agent names the program
// behind the connection) and refuses python3 and a copy of curl made in
// the workspace. Without the rule (the unconfined proof), python3 and
// the copy reach the server.
func TestEgressProgramRules(t *testing.T) {
	b := testBackend(t)
	port := backendtest.HelloServer(t)
	network := func(programs ...string) policy.Network {
		return policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)},
			Requests: []policy.RequestRule{{Host: "web.test", Methods: []string{"GET"}, Programs: programs}}}
	}
	rec := &backendtest.Events{}
	pol := testPolicy(t, workspace(t), func(p *policy.Policy) { direct(p); p.Network = network() })
	id := newID(t)
	px, err := egress.New(egress.Config{SandboxID: id, Network: pol.Network, Audit: rec,
		Resolver: egress.StaticResolver{"web.test": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{ID: id, Policy: pol}
	bundle, _ := egress.SystemBundle()
	px.Attach(&spec, bundle)
	sb := create(t, b, spec)
	u := fmt.Sprintf("http://web.test:%d/x", port)
	clients := map[string]string{
		"curl":         "curl -sS --max-time 20 -o /dev/null -w '%{http_code}' " + u,
		"copy of curl": "cp $(command -v curl) ./curl2 && ./curl2 -sS --max-time 20 -o /dev/null -w '%{http_code}' " + u,
		"python3":      "python3 -c \"import urllib.request as u\ntry: print(u.urlopen('" + u + "').status, end='')\nexcept Exception as e: print(e.code, end='')\"",
	}
	if st, out := sh(t, sb, "command -v curl && command -v python3"); st.Code != 0 {
		t.Fatalf("the test image lacks curl or python3: %+v %q", st, out)
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

// TestEgressGitPreset: real git in a container clones through the git
// preset and pushes only where it names (backendtest.GitThroughRules).
func TestEgressGitPreset(t *testing.T) {
	b := testBackend(t)
	pol := testPolicy(t, workspace(t), direct)
	backendtest.GitThroughRules(t, pol, func(spec sandbox.Spec) sandbox.Sandbox { return create(t, b, spec) })
}
