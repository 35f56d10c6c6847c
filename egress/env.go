package egress

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Paths of the CA bundle inside the sandbox. CAPath is under /run, not
// /etc: backends that show the host's /etc read-only (native) cannot make a
// new directory there, while /run is the sandbox's own on every backend.
const (
	CAPath           = "/run/airlock/ca.pem"
	SystemBundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// SandboxEnv is the environment a sandbox needs for its egress: proxy
// variables (unless the mode is none), one placeholder per secret and the
// CA bundle variables that the common TLS stacks read. Placeholders are the
// only form of a secret that ever enters the sandbox.
func (p *Proxy) SandboxEnv() map[string]string {
	env := map[string]string{}
	if p.policy().mode != policy.NetworkNone {
		httpURL := "http://" + p.listen
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = httpURL
		}
		env["ALL_PROXY"] = "socks5h://" + p.listen
		env["all_proxy"] = env["ALL_PROXY"]
		env["NO_PROXY"] = "localhost,127.0.0.1,::1"
		env["no_proxy"] = env["NO_PROXY"]
	}
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"} {
		env[k] = CAPath
	}
	for _, s := range p.secrets {
		env[s.env] = s.placeholder
	}
	return env
}

// SandboxFiles returns the CA bundle (systemBundle followed by the sandbox
// CA) at CAPath and over the system bundle path, so TLS clients that ignore
// the variables trust the sandbox CA too.
func (p *Proxy) SandboxFiles(systemBundle []byte) []sandbox.File {
	var b bytes.Buffer
	b.Write(systemBundle)
	if len(systemBundle) > 0 && systemBundle[len(systemBundle)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.Write(p.ca.PEM())
	data := b.Bytes()
	return []sandbox.File{
		{Path: CAPath, Data: data, Mode: 0o444},
		{Path: SystemBundlePath, Data: data, Mode: 0o444},
	}
}

// SystemBundle reads the host's CA bundle from the usual places.
func SystemBundle() ([]byte, error) {
	for _, f := range []string{
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/ca-bundle.pem",
		"/etc/ssl/cert.pem",
	} {
		if b, err := os.ReadFile(f); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("read system CA bundle: %w", errors.Join(sandbox.ErrUnavailable, errors.New("no bundle found")))
}
