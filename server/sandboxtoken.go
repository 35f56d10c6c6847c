package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
)

// Sandbox access tokens are credentials for one sandbox, for adapters
// (E2B's envd and traffic tokens) that hand a program a token rather than
// the tenant's key: "alk_st_" + base64url(scope NUL id NUL tenant) + "." +
// an HMAC of that with the server's port-token secret. Nothing is stored:
// the same sandbox and scope always give the same token, and it is worth
// nothing once the sandbox is gone (every route looks the sandbox up for
// the tenant the token names).
const sandboxTokenPrefix = "alk_st_"

func (ps *portSigner) sandboxMAC(body string) string {
	m := hmac.New(sha256.New, ps.key)
	m.Write([]byte("airlock sandbox token v1\x00" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// mintSandbox returns the token of scope for sandbox id of tenant.
func (ps *portSigner) mintSandbox(scope, id, tenant string) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(scope + "\x00" + id + "\x00" + tenant))
	return sandboxTokenPrefix + body + "." + ps.sandboxMAC(body)
}

// checkSandbox verifies tok and returns what it grants.
func (ps *portSigner) checkSandbox(tok string) (scope, id, tenant string, err error) {
	rest, ok := strings.CutPrefix(tok, sandboxTokenPrefix)
	if !ok || len(tok) > 512 {
		return "", "", "", errTokenBad
	}
	body, mac, ok := strings.Cut(rest, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(ps.sandboxMAC(body))) {
		return "", "", "", errTokenBad
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return "", "", "", errTokenBad
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 3 {
		return "", "", "", errTokenBad
	}
	return parts[0], parts[1], parts[2], nil
}

// tokenRoutes are the route patterns each scope reaches (on the sandbox
// the token names only).
var tokenRoutes = map[string]map[string]bool{
	api.TokenScopeSandbox: routeSet(
		"GET /v1/sandboxes/{id}",
		"POST /v1/sandboxes/{id}/exec",
		"GET /v1/sandboxes/{id}/processes",
		"GET /v1/sandboxes/{id}/processes/{pid}",
		"DELETE /v1/sandboxes/{id}/processes/{pid}",
		"POST /v1/sandboxes/{id}/processes/{pid}/signal",
		"POST /v1/sandboxes/{id}/processes/{pid}/wait",
		"GET /v1/sandboxes/{id}/processes/{pid}/output",
		"POST /v1/sandboxes/{id}/processes/{pid}/stdin",
		"GET /v1/sandboxes/{id}/pty",
		"POST /v1/sandboxes/{id}/code",
		"GET /v1/sandboxes/{id}/files",
		"PUT /v1/sandboxes/{id}/files",
		"DELETE /v1/sandboxes/{id}/files",
		"GET /v1/sandboxes/{id}/files/stat",
		"GET /v1/sandboxes/{id}/files/list",
		"POST /v1/sandboxes/{id}/files/rename",
		"POST /v1/sandboxes/{id}/files/mkdir",
		"GET /v1/sandboxes/{id}/archive",
		"PUT /v1/sandboxes/{id}/archive",
		"GET /v1/sandboxes/{id}/files/watch",
		"GET /v1/sandboxes/{id}/tcp/{port}",
		portsPattern,
	),
	api.TokenScopePorts: routeSet("GET /v1/sandboxes/{id}/tcp/{port}", portsPattern),
}

func routeSet(patterns ...string) map[string]bool {
	m := map[string]bool{}
	for _, p := range patterns {
		m[p] = true
	}
	return m
}

var errTokenRoute = errors.New("sandbox access token does not reach this route")

// sandboxTokenCaller authenticates r by sandbox token tok: the tenant it
// names, for the route of r on the sandbox it names only.
func (s *Server) sandboxTokenCaller(r *http.Request, tok string) (string, error) {
	scope, id, tenant, err := s.portTokens.checkSandbox(tok)
	if err != nil {
		return "", err
	}
	if r.PathValue("id") != id || !tokenRoutes[scope][r.Pattern] {
		return "", fmt.Errorf("%w: %s %s", errTokenRoute, r.Method, r.URL.Path)
	}
	return tenant, nil
}

// handleAccessToken returns the caller's sandbox's access token of the
// asked scope (a paused sandbox's too: it is the same after resume).
func (s *Server) handleAccessToken(w http.ResponseWriter, r *http.Request) {
	rec := s.stored(w, r)
	if rec == nil {
		return
	}
	if rec.State == store.StateStopped {
		s.writeError(w, r, fmt.Errorf("sandbox %q: stopped: %w", rec.ID, sandbox.ErrNotFound))
		return
	}
	var req api.AccessTokenRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if tokenRoutes[req.Scope] == nil {
		s.writeError(w, r, errBadRequest("scope %q: want %q or %q", req.Scope, api.TokenScopeSandbox, api.TokenScopePorts))
		return
	}
	c := callerOf(r)
	tok := s.portTokens.mintSandbox(req.Scope, rec.ID, c.tenant)
	s.events.emit(audit.Event{Sandbox: rec.ID, Type: audit.TypeExec, Message: "sandbox access token handed out through the API",
		Fields: map[string]any{"scope": req.Scope, "tenant": c.tenant}})
	writeJSON(w, http.StatusOK, api.AccessToken{Sandbox: rec.ID, Scope: req.Scope, Token: tok})
}
