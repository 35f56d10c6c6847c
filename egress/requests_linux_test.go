package egress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// nodeGet is a Node client (Node 20's fetch ignores proxy variables): a
// CONNECT through HTTPS_PROXY, then TLS and one request.
const nodeGet = `
const http = require('http'), tls = require('tls'), fs = require('fs');
const [method, host, path] = process.argv.slice(2);
const proxy = new URL(process.env.HTTPS_PROXY);
http.request({host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: host + ':443', headers: {Host: host + ':443'}}).on('connect', (res, sock) => {
  if (res.statusCode !== 200) { console.log('connect ' + res.statusCode); return; }
  const t = tls.connect({socket: sock, servername: host, ca: fs.readFileSync(process.env.NODE_EXTRA_CA_CERTS)}, () => {
    t.write(method + ' ' + path + ' HTTP/1.1\r\nHost: ' + host + '\r\nConnection: close\r\n\r\n');
  });
  let out = ''; t.on('data', d => out += d); t.on('end', () => console.log(out.split('\r\n')[0]));
}).end();
`

// TestSandboxRequestRules runs real clients in a real native sandbox
// against request rules: curl, python3 and node requests matching and not
// matching, and git clone/push through the git preset.
func TestSandboxRequestRules(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	for _, b := range []string{"curl", "git", "node"} {
		testutil.RequireBinary(t, b)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testutil.Skip(t, "needs /usr/bin/python3 (visible inside the sandbox)")
	}
	ctx := context.Background()
	g := startGitServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	network := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Requests: []policy.RequestRule{
			{Host: "api.test", Methods: []string{"GET", "HEAD"}, Path: "/pub/**"},
			{Host: "api.test", Methods: []string{"POST"}, Path: "/repos/acme/*/pulls"},
		},
		Git: &policy.GitRules{Fetch: []string{"git.test"}, Push: []string{"git.test/acme/*"}}}
	rec := newRecorder()
	p, err := New(Config{
		SandboxID: "sb-rules-it", Network: network, Audit: rec, RootCAs: g.CA.Pool,
		Resolver: StaticResolver{"api.test": {loopback}, "git.test": {loopback}},
		Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			if ap.Port() != 443 || ap.Addr() != loopback {
				return nil, fmt.Errorf("test refuses to dial %v", ap)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, netip.AddrPortFrom(ap.Addr(), g.Port).String())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "ws")
	os.Mkdir(ws, 0o777)
	os.WriteFile(filepath.Join(ws, "get.js"), []byte(nodeGet), 0o644)
	pol, err := policy.Profile("default")
	if err != nil {
		t.Fatal(err)
	}
	pol.Filesystem.Workspace = ws
	pol.Limits.Timeout = 0
	pol.Network = network
	rpol, err := pol.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/root", Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	system, _ := SystemBundle()
	bundle := append(append([]byte{}, system...), pemOf(g.CA)...)
	b := native.New(native.Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir(), CgroupParent: fmt.Sprintf("airlock-egress-rules-test-%d", os.Getpid())})
	env := p.SandboxEnv()
	env["HOME"] = "/tmp"
	env["GIT_CONFIG_NOSYSTEM"] = "1"
	env["GIT_TERMINAL_PROMPT"] = "0"
	sb, err := b.Create(ctx, sandbox.Spec{ID: "sb-rules-it", Policy: rpol, Audit: rec, Egress: p, Env: env, Files: p.SandboxFiles(bundle)})
	if err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	defer sb.Destroy(ctx)
	run := func(script string) string {
		t.Helper()
		var out bytes.Buffer
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		pr, err := sb.Exec(cctx, sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", script}, Dir: ws, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		pr.Wait(cctx)
		return strings.TrimSpace(out.String())
	}
	code := `curl -sS -o /dev/null -w '%{http_code}' `
	for _, tc := range []struct{ cmd, want string }{
		{code + `https://api.test/pub/a`, "200"},
		{code + `-X POST https://api.test/repos/acme/tool/pulls`, "200"},
		{code + `-X POST https://api.test/repos/evil/tool/pulls`, "403"},
		{code + `https://api.test/private`, "403"},
		{code + `--path-as-is https://api.test/pub/../private`, "403"},
		{`curl -sS https://api.test/private`, "no request rule for api.test matches; to allow it: --allow-request 'GET api.test/private'"},
		{`python3 -c "import urllib.request as u; print(u.urlopen('https://api.test/pub/py').status)"`, "200"},
		{`python3 -c "
import urllib.request as u, urllib.error as e
try: u.urlopen(u.Request('https://api.test/pub/py', method='DELETE'))
except e.HTTPError as x: print(x.code)"`, "403"},
		{`node get.js GET api.test /pub/node`, "HTTP/1.1 200 OK"},
		{`node get.js PUT api.test /pub/node`, "HTTP/1.1 403 Forbidden"},
	} {
		if out := run(tc.cmd); !strings.Contains(out, tc.want) {
			t.Errorf("%s: %q, want %q", tc.cmd, out, tc.want)
		}
	}
	// git: clone from anywhere on git.test, push only to acme/*.
	gitCmd := `git -c user.name=t -c user.email=t@t `
	for _, repo := range []string{"acme", "evil"} {
		out := run(fmt.Sprintf(`cd /tmp && git clone -q https://git.test/%s/repo.git %s && cd %s && echo x > new && git add new && `+gitCmd+`commit -q -m c && echo cloned`, repo, repo, repo))
		if !strings.HasSuffix(out, "cloned") {
			t.Fatalf("clone %s inside: %s", repo, out)
		}
	}
	before := g.Head(t, "evil/repo.git")
	if out := run(`cd /tmp/evil && git push -q origin main; echo "exit=$?"`); strings.HasSuffix(out, "exit=0") {
		t.Errorf("push to evil inside passed: %s", out)
	}
	if g.Head(t, "evil/repo.git") != before {
		t.Error("evil/repo.git changed")
	}
	if out := run(`cd /tmp/acme && git push -q origin main; echo "exit=$?"`); !strings.HasSuffix(out, "exit=0") {
		t.Errorf("push to acme inside: %s", out)
	}
	if g.Head(t, "acme/repo.git") != run(`cd /tmp/acme && git rev-parse HEAD`) {
		t.Error("acme/repo.git did not get the push")
	}
}
