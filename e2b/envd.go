package e2b

import (
	"context"
	"encoding/base64"
	"net/http"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// envd serves E2B's in-sandbox API (port 49983) for every sandbox: the
// process and filesystem Connect-RPC services and the HTTP endpoints
// /health, /envs, /metrics and /files, each call a /v1 call authenticated
// with the sandbox's access token (E2B's envdAccessToken).
type envd struct {
	h   *Handler
	rpc http.Handler
}

// scope is what one envd request acts on.
type scope struct {
	c     *client.Client
	id    string // Airlock sandbox ID
	e2bID string
	user  string // the user the call runs as
	home  string
	token string
	kills *killSet // sandboxes the door is killing
}

type scopeKey struct{}

func scopeOf(ctx context.Context) *scope {
	s, _ := ctx.Value(scopeKey{}).(*scope)
	return s
}

// homeOf is user's home directory in E2B's templates.
func homeOf(user string) string {
	if user == "root" {
		return "/root"
	}
	return "/home/" + user
}

// resolve is E2B's path rule: empty is the home, "~" and "~/x" are in it,
// relative paths are below it, absolute ones stay.
func (s *scope) resolve(p string) string {
	switch {
	case p == "" || p == "~":
		return s.home
	case strings.HasPrefix(p, "~/"):
		return path.Join(s.home, p[2:])
	case !strings.HasPrefix(p, "/"):
		return path.Join(s.home, p)
	}
	return path.Clean(p)
}

// userOfRequest is the user an envd request asks for (HTTP Basic with an
// empty password, as E2B's SDKs send it), or "".
func userOfRequest(r *http.Request) string {
	a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Basic ")
	if !ok {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(a))
	if err != nil {
		return ""
	}
	u, _, _ := strings.Cut(string(b), ":")
	return u
}

// running reports whether sandbox sc.id runs (E2B's paused, /v1's frozen
// or paused, and gone ones do not).
func (sc *scope) running(ctx context.Context) (*api.Sandbox, bool) {
	if sc.kills.has(sc.id) {
		return nil, false // being killed: its streams may break before /v1 says so
	}
	sb, err := sc.c.Get(ctx, sc.id)
	if err != nil || sb.State != "running" {
		return sb, false
	}
	return sb, true
}

// serve answers one envd request for sandbox id.
func (e *envd) serve(w http.ResponseWriter, r *http.Request, id, e2bID string) {
	tok := r.Header.Get("X-Access-Token")
	si, known := e.h.known.get(id)
	sig := r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" && tok == ""
	switch {
	case tok != "":
	case r.URL.Path == "/health" || sig:
		if !known {
			notRunning(w, e2bID)
			return
		}
		tok = si.token
	default:
		writeErr(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
		return
	}
	sc := &scope{c: e.h.client(tok), id: id, e2bID: e2bID, token: tok, kills: &e.h.kills}
	if !known || si.token != tok {
		sb, ok := sc.running(r.Context())
		if !ok {
			if sb == nil {
				// Not a token of this sandbox, or no such sandbox.
				notRunning(w, e2bID)
				return
			}
			if r.URL.Path == "/health" || sb.State != "stopped" {
				notRunning(w, e2bID)
				return
			}
		}
		e.h.remember(sb, tok)
		si, _ = e.h.known.get(id)
	}
	sc.user = si.user
	if u := userOfRequest(r); u != "" {
		sc.user = u
	}
	if u := r.URL.Query().Get("username"); u != "" && r.URL.Path == "/files" {
		sc.user = u
	}
	sc.home = homeOf(sc.user)
	r = r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc))
	switch r.URL.Path {
	case "/health":
		if _, ok := sc.running(r.Context()); !ok {
			notRunning(w, e2bID)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
	case "/envs":
		e.handleEnvs(w, r, sc)
	case "/files":
		e.handleFiles(w, r, sc, sig)
	default:
		e.rpc.ServeHTTP(w, r)
	}
}

// handleEnvs answers the sandbox-wide environment: the create's envVars
// and E2B's own variables.
func (e *envd) handleEnvs(w http.ResponseWriter, r *http.Request, sc *scope) {
	sb, ok := sc.running(r.Context())
	if !ok {
		notRunning(w, sc.e2bID)
		return
	}
	env := map[string]string{"E2B_SANDBOX": "true", "E2B_SANDBOX_ID": sc.e2bID, "E2B_TEMPLATE_ID": templateOf(sb)}
	for k, v := range sb.Env {
		env[k] = v
	}
	writeJSON(w, http.StatusOK, env)
}
