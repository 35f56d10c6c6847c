package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
)

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
	scope, id, tenant, err := s.portTokens.CheckSandbox(tok)
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
	tok := s.portTokens.MintSandbox(req.Scope, rec.ID, c.tenant)
	s.events.emit(audit.Event{Sandbox: rec.ID, Type: audit.TypeExec, Message: "sandbox access token handed out through the API",
		Fields: map[string]any{"scope": req.Scope, "tenant": c.tenant}})
	writeJSON(w, http.StatusOK, api.AccessToken{Sandbox: rec.ID, Scope: req.Scope, Token: tok})
}

// checkTokenScopes validates the access_tokens of a create request: each
// a known scope, none twice (so that a refusal comes before anything is
// made).
func checkTokenScopes(scopes []string) error {
	for i, sc := range scopes {
		if tokenRoutes[sc] == nil {
			return errBadRequest("create sandbox: access_tokens[%d] %q: not a scope (want %q or %q)", i, sc, api.TokenScopeSandbox, api.TokenScopePorts)
		}
		if slices.Contains(scopes[:i], sc) {
			return errBadRequest("create sandbox: access_tokens[%d] %q: listed twice", i, sc)
		}
	}
	return nil
}

// createTokens mints the access tokens a create asked for (scopes
// checked by checkTokenScopes), audited as the access-tokens route's are.
func (s *Server) createTokens(id, tenant string, scopes []string) []api.AccessToken {
	var out []api.AccessToken
	for _, sc := range scopes {
		out = append(out, api.AccessToken{Sandbox: id, Scope: sc, Token: s.portTokens.MintSandbox(sc, id, tenant)})
		s.events.emit(audit.Event{Sandbox: id, Type: audit.TypeExec, Message: "sandbox access token handed out with its create",
			Fields: map[string]any{"scope": sc, "tenant": tenant}})
	}
	return out
}
