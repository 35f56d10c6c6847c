package native

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
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
func programServer(t testing.TB) int { return backendtest.HelloServer(t) }

// programSandbox makes a native sandbox whose proxy has rules (after the
// allowlist entry for the server on port) and returns it with its proxy.
func programSandbox(t testing.TB, port int, rules []policy.RequestRule, rec audit.Sink) (sandbox.Sandbox, *egress.Proxy) {
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
		// The pause: the write mediator closes its copy of the new file's
		// descriptor just after answering the open, and an exec in that
		// moment fails with ETXTBSY (a known defect of the mediator, in
		// the closing note of 2026-12-05; a fix that installs, closes and
		// then answers was tried and withdrawn). This test is about the
		// rule, not that race.
		{"copy of curl", "cp $(command -v curl) ./curl && sleep 0.2 && ./curl -sS --max-time 20 -o /dev/null -w '%{http_code}' " + u},
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

// lastProgram is the program (or why none) of the last egress request
// event.
func lastProgram(e *eventLog) string {
	e.mu <- struct{}{}
	defer func() { <-e.mu }()
	for i := len(e.events) - 1; i >= 0; i-- {
		f := e.events[i].Fields
		if f["request"] != true {
			continue
		}
		if p, ok := f["program"].(string); ok {
			return p
		}
		return fmt.Sprint("unverified: ", f["program_unverified"])
	}
	return ""
}

// TestEgressProgramsFollowLiveRules: on native, the agent names the
// program behind a connection only while a rule names programs, and
// follows live changes (as PUT /v1/sandboxes/{id}/network makes them):
// adding a rule for curl names the very next connection (curl passes,
// python3 is refused), removing it stops the naming.
func TestEgressProgramsFollowLiveRules(t *testing.T) {
	testutil.RequireBinary(t, "curl")
	port := programServer(t)
	rule := func(programs ...string) policy.Network {
		return policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)},
			Requests: []policy.RequestRule{{Host: "web.test", Methods: []string{"GET"}, Programs: programs}}}
	}
	rec := newEventLog()
	sb, px := programSandbox(t, port, rule().Requests, rec)
	u := fmt.Sprintf("http://web.test:%d/x", port)
	scripts := map[string]string{
		"curl":    "curl -sS --max-time 20 -o /dev/null -w '%{http_code}' " + u,
		"python3": "python3 -c \"import urllib.request as u\ntry: print(u.urlopen('" + u + "').status, end='')\nexcept Exception as e: print(e.code, end='')\"",
	}
	const skipped = "unverified: not identified: no rule named programs when it connected"
	for i, step := range []struct {
		programs      []string
		client        string
		code, program string // program "named": any verified path
	}{
		{nil, "curl", "200", skipped},
		{[]string{"curl"}, "curl", "200", "named"},
		{[]string{"curl"}, "python3", "403", "named"},
		{nil, "curl", "200", skipped},
		{nil, "python3", "200", skipped},
	} {
		if i > 0 {
			if err := px.SetNetwork(rule(step.programs...)); err != nil {
				t.Fatal(err)
			}
		}
		_, code := sh(t, sb, scripts[step.client])
		program := lastProgram(rec)
		named := step.program == "named" && strings.HasPrefix(program, "/") && strings.Contains(program, step.client)
		if code != step.code || program != step.program && !named {
			t.Errorf("step %d (programs %v, %s): %s with program %q; want %s with %q", i, step.programs, step.client, code, program, step.code, step.program)
		}
	}
}

// BenchmarkEgressConnectionAgentCPU is the agent's CPU time per proxied
// connection (user+system of the sandbox's init, which is the agent),
// with rules that name no program (the agent does not name the peer) and
// with a rule naming the client (it walks /proc for every connection, as
// it did for every connection before it learnt to skip):
//
//	CI=1 go test ./backend/native -run '^$' -bench BenchmarkEgressConnectionAgentCPU -benchtime 400x
func BenchmarkEgressConnectionAgentCPU(b *testing.B) {
	py, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		b.Skip("no python3")
	}
	for _, bc := range []struct {
		name     string
		programs []string
	}{{"programs=none", nil}, {"programs=python3", []string{py}}} {
		b.Run(bc.name, func(b *testing.B) {
			port := programServer(b)
			sb, _ := programSandbox(b, port, []policy.RequestRule{{Host: "web.test", Programs: bc.programs}}, nil)
			req := fmt.Sprintf("GET http://web.test:%d/x HTTP/1.1\\r\\nHost: web.test:%d\\r\\nConnection: close\\r\\n\\r\\n", port, port)
			script := fmt.Sprintf("python3 -c \"import socket\nok=0\nfor i in range(%d):\n s=socket.create_connection(('127.0.0.1',3128))\n s.sendall(b'%s')\n r=b''\n while True:\n  d=s.recv(65536)\n  if not d: break\n  r+=d\n s.close()\n ok+=r.startswith(b'HTTP/1.1 200')\nprint(ok, end='')\"", b.N, req)
			pid := sb.(*nativeSandbox).cmd.Process.Pid
			cpu0 := processCPU(b, pid)
			b.ResetTimer()
			_, out := sh(b, sb, script)
			b.StopTimer()
			if out != strconv.Itoa(b.N) {
				b.Fatalf("%s of %d connections passed", out, b.N)
			}
			b.ReportMetric(float64((processCPU(b, pid)-cpu0).Microseconds())/float64(b.N), "agent-cpu-µs/conn")
		})
	}
}

// processCPU is pid's user+system CPU time so far (all its threads, not
// its children), from /proc/PID/stat.
func processCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// TestEgressProgramRulesNodeAndH2: a program rule decides for Node (its
// own http client through the proxy: node is named, python3 refused) and
// for an HTTP/2 client (curl --http2 over the intercepted TLS: the
// request is decided on its h2 stream and curl is named). The proof:
// before the rule names programs, python3 passes the same way.
func TestEgressProgramRulesNodeAndH2(t *testing.T) {
	testutil.RequireBinary(t, "curl")
	testutil.RequireBinary(t, "node")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "HELLO-FROM-HOST")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	network := func(programs ...string) policy.Network {
		return policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)},
			Requests: []policy.RequestRule{{Host: "example.com", Methods: []string{"GET"}, Programs: programs}}}
	}
	rec := newEventLog()
	b := testBackend(t)
	pol := testPolicy(t, workspace(t), func(p *policy.Policy) { p.Network = network() })
	id := newID(t)
	px, err := egress.New(egress.Config{SandboxID: id, Network: pol.Network, Audit: rec, RootCAs: roots,
		Resolver: egress.StaticResolver{"example.com": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{ID: id, Policy: pol}
	px.Attach(&spec, nil)
	sb := backendtest.Create(t, b, spec, 60*time.Second)
	u := fmt.Sprintf("https://example.com:%d/x", port)
	clients := map[string]string{
		// curl prints the HTTP version of its own leg (to the proxy's TLS).
		"curl --http2": "curl -sS --http2 --max-time 20 -o /dev/null -w '%{http_code} h%{http_version}' " + u,
		// Node's https client, tunnelled by CONNECT through the proxy
		// (Host names the target, as npm proxy agents send it).
		"node": `node -e '
const http = require("http"), https = require("https"), u = new URL(process.env.HTTPS_PROXY || process.env.https_proxy);
http.request({host: u.hostname, port: u.port, method: "CONNECT", path: "example.com:` + strconv.Itoa(port) + `", headers: {host: "example.com:` + strconv.Itoa(port) + `"}}).on("connect", (res, socket) => {
  if (res.statusCode !== 200) { process.stdout.write(String(res.statusCode)); return; }
  https.get({host: "example.com", port: ` + strconv.Itoa(port) + `, path: "/x", socket, agent: false, ca: require("fs").readFileSync(process.env.NODE_EXTRA_CA_CERTS || process.env.SSL_CERT_FILE)},
    r => { process.stdout.write(String(r.statusCode)); r.resume(); }).on("error", e => process.stdout.write("error " + e.message));
}).on("error", e => process.stdout.write("error " + e.message)).end();'`,
		"python3": "python3 -c \"import urllib.request as u\ntry: print(u.urlopen('" + u + "').status, end='')\nexcept Exception as e: print(getattr(e, 'code', e), end='')\"",
	}
	for _, name := range []string{"curl --http2", "node", "python3"} {
		if _, out := sh(t, sb, clients[name]); !strings.HasPrefix(out, "200") {
			t.Fatalf("without a program rule %s got %q, want 200 (the proof); refusals %v", name, out, refusals(rec))
		}
	}
	if err := px.SetNetwork(network("curl", "node")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ client, want, program string }{
		{"curl --http2", "200 h2", "/curl"}, {"node", "200", "/node"}, {"python3", "403", ""},
	} {
		_, out := sh(t, sb, clients[tc.client])
		prog := lastProgram(rec)
		if out != tc.want {
			t.Errorf("programs [curl node], %s: %q (program %q), want %q; refusals %v", tc.client, out, prog, tc.want, refusals(rec))
		}
		if tc.program != "" && !(strings.HasPrefix(prog, "/") && strings.HasSuffix(prog, tc.program)) {
			t.Errorf("programs [curl node], %s passed as %q, want a path ending in %s", tc.client, prog, tc.program)
		}
	}
}
