// Package realserver starts the "real" servers egress tests talk to through
// the proxy: HTTPS servers with certificates of a test CA, and git's own
// smart-HTTP server (git http-backend) behind one. Tests only.
package realserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// CA issues server certificates for the tests' upstream servers.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	Pool *x509.CertPool // holds Cert: what a client (or the proxy) trusts
}

// NewCA makes a CA valid for an hour either side of now.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Key: key, Pool: pool}
}

// PEM is the CA's certificate in PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// ServerConfig is a TLS server configuration with a certificate for names
// (DNS names or IP addresses).
func (ca *CA) ServerConfig(t testing.TB, names ...string) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// StartTLS starts an HTTPS server on 127.0.0.1 for names, closed when t
// ends, and returns its port.
func StartTLS(t testing.TB, ca *CA, h http.Handler, names ...string) uint16 {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = ca.ServerConfig(t, names...)
	s.StartTLS()
	t.Cleanup(s.Close)
	return uint16(s.Listener.Addr().(*net.TCPAddr).Port)
}

// Git is git's own smart-HTTP server (git http-backend as CGI) behind a
// real TLS server for git.test, with bare repositories acme/repo.git and
// evil/repo.git, both accepting pushes.
type Git struct {
	Root string // the repositories
	Port uint16
	CA   *CA
}

// StartGit starts it; other, when set, also serves api.test on the same
// server.
func StartGit(t testing.TB, other http.Handler) *Git {
	t.Helper()
	gitBin := testutil.RequireBinary(t, "git")
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	root := t.TempDir()
	seed := t.TempDir()
	GitRun(t, seed, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	GitRun(t, seed, "add", "README")
	GitRun(t, seed, "commit", "-q", "-m", "seed")
	for _, r := range []string{"acme/repo.git", "evil/repo.git"} {
		dir := filepath.Join(root, r)
		GitRun(t, root, "clone", "-q", "--bare", seed, dir)
		GitRun(t, dir, "config", "http.receivepack", "true")
	}
	ca := NewCA(t)
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	var srv http.Handler = h
	if other != nil {
		srv = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host == "api.test" {
				other.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	return &Git{Root: root, Port: StartTLS(t, ca, srv, "git.test", "api.test"), CA: ca}
}

// Head is the commit of main in repo (e.g. "acme/repo.git").
func (g *Git) Head(t testing.TB, repo string) string {
	return strings.TrimSpace(GitRun(t, filepath.Join(g.Root, repo), "rev-parse", "main"))
}

// GitRun runs git in dir on the host, with an author and no system
// configuration, and fails t when it fails.
func GitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}
