package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Sandbox access tokens are credentials for one sandbox, for adapters
// (E2B's envd and traffic tokens) that hand a program a token rather than
// the tenant's key: "alk_st_" + base64url(scope NUL id NUL tenant) + "." +
// an HMAC of that with the server's port-token secret. Nothing is stored:
// the same sandbox and scope always give the same token, and it is worth
// nothing once the sandbox is gone (every route looks the sandbox up for
// the tenant the token names).
const SandboxPrefix = "alk_st_"

func (ps *Signer) sandboxMAC(body string) string {
	m := hmac.New(sha256.New, ps.key)
	m.Write([]byte("airlock sandbox token v1\x00" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// MintSandbox returns the token of scope for sandbox id of tenant.
func (ps *Signer) MintSandbox(scope, id, tenant string) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(scope + "\x00" + id + "\x00" + tenant))
	return SandboxPrefix + body + "." + ps.sandboxMAC(body)
}

// CheckSandbox verifies tok and returns what it grants.
func (ps *Signer) CheckSandbox(tok string) (scope, id, tenant string, err error) {
	rest, ok := strings.CutPrefix(tok, SandboxPrefix)
	if !ok || len(tok) > 512 {
		return "", "", "", ErrBad
	}
	body, mac, ok := strings.Cut(rest, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(ps.sandboxMAC(body))) {
		return "", "", "", ErrBad
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return "", "", "", ErrBad
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 3 {
		return "", "", "", ErrBad
	}
	return parts[0], parts[1], parts[2], nil
}
