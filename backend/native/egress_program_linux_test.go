package native

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/backendtest"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// programServer is a host HTTP server a sandbox reaches as web.test.
func programServer(t *testing.T) int {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "HELLO-FROM-HOST")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// programSandbox makes a native sandbox whose proxy has rules (after the
// allowlist entry for the server on port) and returns it with its proxy.
func programSandbox(t *testing.T, port int, rules []policy.RequestRule, rec audit.Sink) (sandbox.Sandbox, *egress.Proxy) {
	t.Helper()
	b := testBackend(t)
	network := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)}, Requests: rules}
	ws := workspace(t)
	pol := testPolicy(t, ws, func(p *policy.Policy) { p.Network = network })
	id := newID(t)
	px, err := egress.New(egress.Config{SandboxID: id, Network: pol.Network, Audit: rec,
		Resolver: egress.StaticResolver{"web.test": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{ID: id, Policy: pol}
	px.Attach(&spec, nil)
	return backendtest.Create(t, b, spec, 60*time.Second), px
}

// TestEgressProgramRulesReliable: on native, a program rule for curl lets
// every one of 30 curl connections through (the agent names curl each
// time), and refuses python3 and a copy of curl in the workspace.
func TestEgressProgramRulesReliable(t *testing.T) {
	testutil.RequireBinary(t, "curl")
	port := programServer(t)
	rec := newEventLog()
	sb, _ := programSandbox(t, port, []policy.RequestRule{{Host: "web.test", Methods: []string{"GET"}, Programs: []string{"curl"}}}, rec)
	u := fmt.Sprintf("http://web.test:%d/x", port)
	const n = 30
	_, out := sh(t, sb, fmt.Sprintf("for i in $(seq %d); do curl -sS --max-time 20 -o /dev/null -w '%%{http_code}\\n' %s; done", n, u))
	if got := strings.Count(out, "200"); got != n {
		t.Errorf("%d of %d curl connections passed the rule for curl; output %q; refusals: %v", got, n, out, refusals(rec))
	}
	for _, tc := range []struct{ name, script string }{
		{"python3", "python3 -c \"import urllib.request as u\ntry: u.urlopen('" + u + "')\nexcept Exception as e: print(e.code, end='')\""},
		{"copy of curl", "cp $(command -v curl) ./curl && ./curl -sS --max-time 20 -o /dev/null -w '%{http_code}' " + u},
	} {
		if _, out := sh(t, sb, tc.script); out != "403" {
			t.Errorf("%s: %q, want 403", tc.name, out)
		}
	}
}

// refusals lists the reasons of refused requests (with why the program
// was not verified).
func refusals(e *eventLog) []string {
	e.mu <- struct{}{}
	defer func() { <-e.mu }()
	var out []string
	for _, ev := range e.events {
		if ev.Fields["action"] == "deny" {
			out = append(out, fmt.Sprintf("%v (%v)", ev.Fields["reason"], ev.Fields["program_unverified"]))
		}
	}
	return out
}
