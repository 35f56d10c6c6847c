package egress

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestSandboxEgress is the "Must show": real curl and python3 in a
// real native sandbox (own network namespace, only loopback, the agent's
// tunnel to this proxy) against real servers on this machine's loopback,
// with names resolved by the test's resolver.
func TestSandboxEgress(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "curl")
	testutil.RequireBinary(t, "python3")
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testutil.Skip(t, "needs /usr/bin/python3 (visible inside the sandbox)")
	}
	ctx := context.Background()

	// The "real" servers: api.test (the secret's host) and other.test over
	// HTTPS, web.test over plain HTTP, an internal service that only a
	// process on this host should reach, and a UDP "DNS server".
	ca := newTestCA(t)
	srv := &seen{}
	tlsPort := startTLS(t, ca, http.HandlerFunc(srv.handler), "api.test", "other.test")
	webPort := startHTTP(t, http.HandlerFunc(srv.handler))
	internalPort := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal secrets") }))
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	udpQueries := make(chan struct{}, 16)
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			udpQueries <- struct{}{}
			udp.WriteTo(buf[:n], from)
		}
	}()
	udpPort := udp.LocalAddr().(*net.UDPAddr).Port

	// Unconfined, each attack target works: the internal service answers,
	// the UDP server answers.
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", internalPort)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("unconfined internal service: %v", err)
	}
	if c, err := net.Dial("udp", udp.LocalAddr().String()); err == nil {
		c.Write([]byte("q"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 16)); err != nil {
			t.Fatalf("unconfined UDP: %v", err)
		}
		c.Close()
		<-udpQueries
	}

	realKey := "sk-live-" + rand.Text()
	network := policy.Network{
		Mode: policy.NetworkAllowlist,
		// The test servers live on 127.0.0.1, so loopback is allowed for
		// exactly their ports; loop.test (127.0.0.1, another port) and
		// meta.test (169.254.169.254) prove the guard around them.
		Allow: []string{"api.test", "other.test", "web.test", "loop.test", "meta.test",
			"127.0.0.1/32:443", fmt.Sprintf("127.0.0.1/32:%d", webPort)},
	}
	rec := newRecorder()
	var dialMu sync.Mutex
	var dialed []netip.AddrPort
	p, err := New(Config{
		SandboxID: "sb-egress-it",
		Network:   network,
		Secrets:   []policy.Secret{{Name: "API_KEY", FromEnv: "HOST_API_KEY", Hosts: []string{"api.test"}}},
		Audit:     rec,
		Resolver: StaticResolver{
			"api.test": {loopback}, "other.test": {loopback}, "web.test": {loopback},
			"loop.test": {loopback}, "meta.test": {netip.MustParseAddr("169.254.169.254")},
		},
		Getenv:  func(k string) string { return map[string]string{"HOST_API_KEY": realKey}[k] },
		RootCAs: ca.Pool,
		Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			dialMu.Lock()
			dialed = append(dialed, ap)
			dialMu.Unlock()
			if ap.Port() == 443 { // the test cannot listen on 443
				ap = netip.AddrPortFrom(ap.Addr(), tlsPort)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, ap.String())
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	// The sandbox.
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "attack.py"), []byte(attackScript), 0o644); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Profile("default")
	if err != nil {
		t.Fatal(err)
	}
	pol.Filesystem.Workspace = ws
	pol.Limits.Timeout = 0
	pol.Network = network
	rpol, err := pol.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/root", Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"}, UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	system, err := SystemBundle()
	if err != nil {
		t.Fatal(err)
	}
	// The real servers' CA stands in for a public CA in the system bundle.
	bundle := append(append([]byte{}, system...), pemOf(ca)...)
	// A cgroup parent of its own: another test's Cleanup (which ends every
	// sandbox under its parent it does not know) cannot end this one.
	b := native.New(native.Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir(), CgroupParent: fmt.Sprintf("airlock-egress-test-%d", os.Getpid())})
	sb, err := b.Create(ctx, sandbox.Spec{
		ID: "sb-egress-it", Policy: rpol, Audit: rec, Egress: p,
		Env: p.SandboxEnv(), Files: p.SandboxFiles(bundle),
	})
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
		if _, err := pr.Wait(cctx); err != nil {
			t.Fatalf("wait %q: %v", script, err)
		}
		return strings.TrimSpace(out.String())
	}
	py := func(args ...string) string { return run("/usr/bin/python3 attack.py " + strings.Join(args, " ")) }
	placeholder := p.SandboxEnv()["API_KEY"]

	// 1. curl to the allowed name succeeds; the secret's real value reaches
	// the server, the sandbox sent only the placeholder.
	if out := run(`curl -sS --fail https://api.test/v1 -H "Authorization: Bearer $API_KEY"`); out != "ok" {
		t.Fatalf("curl https://api.test: %q", out)
	}
	if host, h := srv.last(); host != "api.test" || h.Get("Authorization") != "Bearer "+realKey {
		t.Fatalf("api.test got host %q Authorization %q", host, h.Get("Authorization"))
	}
	// 2. Python urllib (https_proxy, SSL_CERT_FILE) does too.
	if out := py("urllib", "https://api.test/py"); out != "ok" {
		t.Fatalf("urllib https://api.test: %q", out)
	}
	if _, h := srv.last(); h.Get("X-Api-Key") != realKey {
		t.Fatalf("api.test got x-api-key %q", h.Get("X-Api-Key"))
	}
	// 3. A second server that is reachable but not the secret's host gets
	// the placeholder, never the value; plain HTTP neither, and is logged.
	if out := run(`curl -sS --fail https://other.test/ -H "Authorization: Bearer $API_KEY"`); out != "ok" {
		t.Fatalf("curl https://other.test: %q", out)
	}
	if _, h := srv.last(); h.Get("Authorization") != "Bearer "+placeholder {
		t.Fatalf("other.test got %q", h.Get("Authorization"))
	}
	if out := run(fmt.Sprintf(`curl -sS --fail http://web.test:%d/ -H "X-Api-Key: $API_KEY"`, webPort)); out != "ok" {
		t.Fatalf("curl http://web.test: %q", out)
	}
	if _, h := srv.last(); h.Get("X-Api-Key") != placeholder {
		t.Fatalf("web.test got %q", h.Get("X-Api-Key"))
	}
	rec.wait(t, "placeholder to web.test logged", func(e audit.Event) bool {
		return egressEvent("allow", "web.test", "")(e) && fmt.Sprint(e.Fields["placeholders_not_replaced"]) == "[API_KEY]"
	})

	// 4. Denied: a name outside the allow list.
	if out := run(`curl -sS -o /dev/null -w '%{http_code}' https://denied.test/; echo " exit=$?"`); !strings.Contains(out, "exit=56") {
		t.Errorf("curl https://denied.test: %q", out)
	}
	rec.wait(t, "deny denied.test", egressEvent("deny", "denied.test", "not in allow list"))

	// 5. A raw TCP connect that ignores the proxy: nothing but loopback in
	// the sandbox's namespace, the host's service is unreachable.
	if out := py("tcp", fmt.Sprint(internalPort)); out == "connected" {
		t.Errorf("raw TCP to the host's 127.0.0.1:%d connected", internalPort)
	}
	if out := run(fmt.Sprintf(`curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:%d/; echo " exit=$?"`, internalPort)); strings.Contains(out, "internal secrets") {
		t.Errorf("curl --noproxy reached the host service: %q", out)
	}
	// 6. A UDP DNS query gets no answer and never reaches the host.
	if out := py("udp", fmt.Sprint(udpPort)); !strings.HasPrefix(out, "no answer") {
		t.Errorf("UDP query: %q", out)
	}
	select {
	case <-udpQueries:
		t.Error("a UDP datagram from the sandbox reached the host")
	default:
	}

	// 7. Allowed names resolving to loopback (another port) or the cloud
	// metadata address are refused, and never dialed.
	if out := run(fmt.Sprintf(`curl -sS -o /dev/null -w '%%{http_code}' http://loop.test:%d/`, internalPort)); out != "403" {
		t.Errorf("curl loop.test: %q", out)
	}
	if out := run(`curl -sS -o /dev/null -w '%{http_code}' http://meta.test/latest/meta-data/`); out != "403" {
		t.Errorf("curl meta.test: %q", out)
	}
	rec.wait(t, "deny loop.test", egressEvent("deny", "loop.test", "is loopback"))
	rec.wait(t, "deny meta.test", egressEvent("deny", "meta.test", "link-local"))

	// 8. SOCKS5 hostname with an embedded NUL (control: the clean name works).
	if out := py("socks", hex.EncodeToString([]byte("other.test")), "443"); out != "reply 0" {
		t.Errorf("SOCKS other.test: %q", out)
	}
	if out := py("socks", hex.EncodeToString([]byte("denied.test\x00.other.test")), "443"); out != "reply 2" {
		t.Errorf("SOCKS NUL name: %q", out)
	}
	rec.wait(t, "deny NUL", egressEvent("deny", `"denied.test\x00.other.test"`, "control byte"))

	// 9. CONNECT whose SNI differs (control: matching SNI works).
	if out := py("sni", "other.test:443", "other.test"); !strings.HasPrefix(out, "handshake ok") {
		t.Errorf("matching SNI: %q", out)
	}
	if out := py("sni", "other.test:443", "denied.test"); !strings.HasPrefix(out, "handshake failed") {
		t.Errorf("SNI denied.test inside CONNECT other.test: %q", out)
	}
	rec.wait(t, "deny SNI", egressEvent("deny", "other.test", "SNI denied.test differs"))

	// 10. A decimal IP literal (control: the canonical literal is allowed).
	if out := py("connect", "127.0.0.1:443"); !strings.Contains(out, " 200 ") {
		t.Errorf("CONNECT 127.0.0.1:443: %q", out)
	}
	if out := py("connect", "2130706433:443"); !strings.Contains(out, " 403 ") {
		t.Errorf("CONNECT 2130706433:443: %q", out)
	}
	rec.wait(t, "deny decimal", egressEvent("deny", "2130706433", "non-canonical IP literal"))

	// 11. The real value is nowhere inside: not in any process's
	// environment, not in the files a process can read, not in the memory
	// of any process it can read. (Control: the placeholder is found.)
	if out := run(`cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c "` + placeholder + `"`); out == "0" {
		t.Errorf("placeholder not in any environment (control): %q", out)
	}
	if out := run(`cat /proc/[0-9]*/environ 2>/dev/null | grep -c "` + realKey + `"`); out != "0" {
		t.Errorf("real value in an environment: %q", out)
	}
	if out := run(`grep -rlsF "` + realKey + `" /etc /tmp /root /run /var/tmp "$PWD" 2>/dev/null | head -3; echo done`); out != "done" {
		t.Errorf("real value in a file: %q", out)
	}
	scan := py("memscan", hex.EncodeToString([]byte(placeholder)))
	if !strings.HasPrefix(scan, "hits ") || strings.HasPrefix(scan, "hits 0 ") {
		t.Errorf("memory scan control found no placeholder: %q", scan)
	}
	if out := py("memscan", hex.EncodeToString([]byte(realKey))); !strings.HasPrefix(out, "hits 0 ") {
		t.Errorf("real value in process memory: %q", out)
	}

	// Nothing denied was ever dialed.
	dialMu.Lock()
	defer dialMu.Unlock()
	for _, ap := range dialed {
		if ap.Addr() != loopback || (ap.Port() != 443 && ap.Port() != webPort) {
			t.Errorf("proxy dialed %v", ap)
		}
	}
	if st := p.Stats(); st.SecretsInjected < 2 || st.Denied < 6 || st.PlaceholderLeaks < 1 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("proxy stats %+v", p.Stats())
}
