package egress

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

const realKey = "sk-real-0123456789abcdef"
const realToken = "tok-real-fedcba9876543210"

// seen records what the "real" servers received.
type seen struct {
	mu   sync.Mutex
	reqs []http.Header
	host []string
}

func (s *seen) handler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Header.Clone())
	s.host = append(s.host, r.Host)
	s.mu.Unlock()
	w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	io.WriteString(w, "ok")
}

func (s *seen) last() (string, http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.host[len(s.host)-1], s.reqs[len(s.reqs)-1]
}

func secretHarness(t *testing.T, rootCAs *x509.CertPool) (*harness, *seen, uint16, *testCA) {
	ca := newTestCA(t)
	s := &seen{}
	tlsPort := startTLS(t, ca, http.HandlerFunc(s.handler), "api.test", "other.test", "third.test")
	plainPort := startHTTP(t, http.HandlerFunc(s.handler))
	if rootCAs == nil {
		rootCAs = ca.Pool
	}
	h := newHarness(t, Config{
		Network:  allowlist("api.test", "other.test", "third.test", "web.test", "127.0.0.1/32"),
		Resolver: StaticResolver{"api.test": {loopback}, "other.test": {loopback}, "third.test": {loopback}, "web.test": {loopback}},
		Secrets: []policy.Secret{
			{Name: "API_KEY", FromEnv: "HOST_API_KEY", Hosts: []string{"api.test"}},
			{Name: "token", Env: "OTHER_TOKEN", FromFile: "/host/token", Hosts: []string{"third.test:443"}},
		},
		Getenv: func(k string) string {
			if k == "HOST_API_KEY" {
				return realKey
			}
			return ""
		},
		ReadFile: func(f string) ([]byte, error) {
			if f == "/host/token" {
				return []byte(realToken + "\n"), nil
			}
			return nil, os.ErrNotExist
		},
		RootCAs: rootCAs,
	}, tlsPort)
	return h, s, plainPort, ca
}

func get(t *testing.T, c *http.Client, u string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestSecretInjection(t *testing.T) {
	h, srv, plainPort, ca := secretHarness(t, nil)
	env := h.p.SandboxEnv()
	key, tok := env["API_KEY"], env["OTHER_TOKEN"]
	if !strings.HasPrefix(key, "airlock-secret-api_key-") || !strings.HasPrefix(tok, "airlock-secret-token-") || key == tok {
		t.Fatalf("placeholders %q %q", key, tok)
	}
	// The sandbox trusts what SandboxFiles gives it: the system bundle (here
	// the test CA of the real servers) plus the sandbox CA.
	files := h.p.SandboxFiles(pemOf(ca))
	if len(files) != 2 || files[0].Path != CAPath || files[1].Path != SystemBundlePath {
		t.Fatalf("files %+v", files)
	}
	roots := poolWith(t, files[0].Data)
	c := h.client(roots)
	c.Transport.(*http.Transport).DisableKeepAlives = false

	// 1. The allowed host gets the real value in every header.
	for i := 0; i < 2; i++ { // twice: over one kept-alive intercepted connection
		resp := get(t, c, "https://api.test/v1", map[string]string{
			"Authorization": "Bearer " + key, "X-Api-Key": key, "X-Custom": "a " + key + " b",
		})
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		host, got := srv.last()
		if host != "api.test" || got.Get("Authorization") != "Bearer "+realKey || got.Get("X-Api-Key") != realKey || got.Get("X-Custom") != "a "+realKey+" b" {
			t.Fatalf("server saw host %q headers %v", host, got)
		}
		// The echo of the credential comes back as the placeholder.
		if e := resp.Header.Get("X-Echo"); e != "Bearer "+key {
			t.Fatalf("echoed header reached the sandbox as %q", e)
		}
		if iss := resp.TLS.PeerCertificates[0].Issuer.CommonName; !strings.HasPrefix(iss, "Airlock egress CA") {
			t.Fatalf("api.test was not intercepted (issuer %q)", iss)
		}
	}
	c.CloseIdleConnections() // allowed attempts are recorded when they end
	e := h.rec.wait(t, "injection event", func(e audit.Event) bool {
		return egressEvent("allow", "api.test", "")(e) && e.Fields["tls_intercepted"] == true
	})
	if fmt.Sprint(e.Fields["secrets_injected"]) != "[API_KEY]" || e.Fields["requests"] != int64(2) {
		t.Errorf("event %v", e.Fields)
	}

	// 2. A host the secret may not go to, intercepted for another secret:
	// API_KEY's placeholder stays, token's is replaced; the attempt is logged.
	get(t, c, "https://third.test/", map[string]string{"Authorization": "Bearer " + key, "X-Token": tok})
	_, got := srv.last()
	if got.Get("Authorization") != "Bearer "+key || got.Get("X-Token") != realToken {
		t.Fatalf("third.test saw %v", got)
	}
	c.CloseIdleConnections()
	h.rec.wait(t, "placeholder leak event", func(e audit.Event) bool {
		return egressEvent("allow", "third.test", "")(e) && fmt.Sprint(e.Fields["placeholders_not_replaced"]) == "[API_KEY]"
	})

	// 3. Plain HTTP never carries a real value, even to a secret's host.
	get(t, c, fmt.Sprintf("http://api.test:%d/", plainPort), map[string]string{"Authorization": "Bearer " + key})
	if _, got := srv.last(); got.Get("Authorization") != "Bearer "+key {
		t.Fatalf("plain HTTP to api.test carried %q", got.Get("Authorization"))
	}
	get(t, c, fmt.Sprintf("http://web.test:%d/?k=%s", plainPort, url.QueryEscape(tok)), map[string]string{"X-Api-Key": key})
	if _, got := srv.last(); got.Get("X-Api-Key") != key {
		t.Fatalf("plain HTTP to web.test carried %q", got.Get("X-Api-Key"))
	}
	c.CloseIdleConnections()
	h.rec.wait(t, "plain leak event", func(e audit.Event) bool {
		return egressEvent("allow", "web.test", "")(e) && fmt.Sprint(e.Fields["placeholders_not_replaced"]) == "[API_KEY token]"
	})

	// 4. Port-scoped secret host: token is for third.test:443 only.
	if h.p.secretHost("third.test", 8443) || !h.p.secretHost("third.test", 443) || h.p.secretHost("other.test", 443) {
		t.Error("port scoping of secret hosts")
	}

	st := h.p.Stats()
	if st.SecretsInjected < 3 || st.PlaceholderLeaks < 3 {
		t.Errorf("stats %+v", st)
	}
	// The real values are nowhere the sandbox or the audit log can see.
	all, _ := json.Marshal(h.rec.all())
	blob := string(all) + fmt.Sprint(env) + string(files[0].Data) + string(files[1].Data)
	if strings.Contains(blob, realKey) || strings.Contains(blob, realToken) {
		t.Fatal("a real secret value reached the sandbox env, files or audit events")
	}
}

// A non-secret host is tunnelled, not intercepted: the sandbox sees the
// real server's certificate and the placeholder goes through untouched.
func TestNoInterceptionElsewhere(t *testing.T) {
	h, srv, _, ca := secretHarness(t, nil)
	key := h.p.SandboxEnv()["API_KEY"]
	c := h.client(ca.Pool) // trusts only the real servers' CA
	resp := get(t, c, "https://other.test/", map[string]string{"Authorization": "Bearer " + key})
	if resp.StatusCode != 200 || resp.TLS.PeerCertificates[0].Issuer.CommonName != "test upstream CA" {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, got := srv.last(); got.Get("Authorization") != "Bearer "+key {
		t.Fatalf("other.test saw %q", got.Get("Authorization"))
	}
	// And the same client refuses api.test, which is intercepted: its
	// certificate comes from the sandbox CA this client does not trust.
	if _, err := c.Get("https://api.test/"); err == nil {
		t.Fatal("api.test was not intercepted")
	}
}

func TestUpstreamVerified(t *testing.T) {
	// The proxy verifies the real server against RootCAs: an untrusted
	// upstream certificate ends the connection, nothing is sent.
	h, srv, _, _ := secretHarness(t, x509.NewCertPool())
	roots := poolWith(t, h.p.CAPEM())
	key := h.p.SandboxEnv()["API_KEY"]
	req, _ := http.NewRequest("GET", "https://api.test/", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err := h.client(roots).Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request through an unverified upstream succeeded")
	}
	h.rec.wait(t, "upstream TLS", egressEvent("allow", "api.test", "upstream TLS"))
	srv.mu.Lock()
	n := len(srv.reqs)
	srv.mu.Unlock()
	if n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
}

func pemOf(ca *testCA) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

func TestNewRejectsBadConfig(t *testing.T) {
	getenv := func(k string) string {
		switch k {
		case "SET":
			return "value"
		case "NL":
			return "a\nb"
		}
		return ""
	}
	cases := []Config{
		{Network: policy.Network{Mode: "bogus"}},
		{Network: allowlist("2130706433")},
		{Secrets: []policy.Secret{{Name: "K", FromEnv: "UNSET", Hosts: []string{"api.test"}}}},
		{Secrets: []policy.Secret{{Name: "K", FromEnv: "SET"}}},
		{Secrets: []policy.Secret{{Name: "K", FromEnv: "SET", FromFile: "/x", Hosts: []string{"api.test"}}}},
		{Secrets: []policy.Secret{{Name: "K", Hosts: []string{"api.test"}}}},
		{Secrets: []policy.Secret{{Name: "K", FromEnv: "SET", Hosts: []string{"10.0.0.0/8"}}}},
		{Secrets: []policy.Secret{{Name: "K", FromEnv: "NL", Hosts: []string{"api.test"}}}},
		{Secrets: []policy.Secret{{Name: "K", FromFile: "/missing", Hosts: []string{"api.test"}}}},
		{Secrets: []policy.Secret{{Name: "A", Env: "X", FromEnv: "SET", Hosts: []string{"a.test"}}, {Name: "B", Env: "X", FromEnv: "SET", Hosts: []string{"b.test"}}}},
		{Secrets: []policy.Secret{{Name: "", FromEnv: "SET", Hosts: []string{"a.test"}}}},
	}
	for i, cfg := range cases {
		cfg.Getenv = getenv
		cfg.ReadFile = func(string) ([]byte, error) { return nil, os.ErrNotExist }
		if cfg.Network.Mode == "" {
			cfg.Network.Mode = policy.NetworkAllowlist
		}
		if _, err := New(cfg); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("case %d: got %v, want ErrInvalid", i, err)
		}
	}
}

func TestSandboxEnv(t *testing.T) {
	p, err := New(Config{SandboxID: "sb-1", Network: allowlist("api.test"),
		Secrets: []policy.Secret{{Name: "K", FromEnv: "SET", Hosts: []string{"api.test"}}},
		Getenv:  func(string) string { return "v" }})
	if err != nil {
		t.Fatal(err)
	}
	env := p.SandboxEnv()
	for k, v := range map[string]string{
		"HTTP_PROXY": "http://127.0.0.1:3128", "https_proxy": "http://127.0.0.1:3128",
		"ALL_PROXY": "socks5h://127.0.0.1:3128", "all_proxy": "socks5h://127.0.0.1:3128",
		"NO_PROXY": "localhost,127.0.0.1,::1", "SSL_CERT_FILE": CAPath, "REQUESTS_CA_BUNDLE": CAPath,
		"NODE_EXTRA_CA_CERTS": CAPath, "CURL_CA_BUNDLE": CAPath,
	} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if !strings.HasPrefix(env["K"], "airlock-secret-k-") {
		t.Errorf("K = %q", env["K"])
	}
	// The CA is constrained to the secret hosts: it cannot vouch for others.
	ca, _ := x509.ParseCertificate(p.ca.certDER)
	if !ca.PermittedDNSDomainsCritical || fmt.Sprint(ca.PermittedDNSDomains) != "[api.test]" {
		t.Errorf("CA constraints %v", ca.PermittedDNSDomains)
	}
	leaf, err := p.ca.leaf("evil.test")
	if err != nil {
		t.Fatal(err)
	}
	lc, _ := x509.ParseCertificate(leaf.Certificate[0])
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := lc.Verify(x509.VerifyOptions{DNSName: "evil.test", Roots: pool}); err == nil {
		t.Error("the sandbox CA vouches for a host outside its constraints")
	}
	leaf, _ = p.ca.leaf("api.test")
	lc, _ = x509.ParseCertificate(leaf.Certificate[0])
	if _, err := lc.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: pool}); err != nil {
		t.Errorf("leaf for api.test: %v", err)
	}
}
