package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
	"github.com/airlock-dev/airlock/ui"
)

// The web console (/ui) is a client of the /v1 API like any other: it
// logs in with an API key (or a one-time link `airlock console` prints),
// gets a session cookie, and every /v1 call it makes carries that cookie
// and the console header. The server treats a session exactly as the
// key (or local link) it was made from, minus the trusted socket's
// host-path rights.
const (
	consoleCookie = "airlock_console"
	// consoleHeader must be on every cookie-authenticated request but a
	// WebSocket: a cross-site page cannot send a custom header without a
	// CORS preflight, which this server never grants.
	consoleHeader  = "X-Airlock-Console"
	sessionTTL     = 12 * time.Hour
	loginLinkTTL   = 2 * time.Minute
	maxSessions    = 10000
	consoleCSP     = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	portSandboxCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"
)

// session is one logged-in console: its API key (checked again on every
// request, so a revoked key ends it) or, from a login link, the local
// tenant.
type session struct {
	key     string
	tenant  string
	expires time.Time
}

// consoleSessions holds sessions and unused login links, in memory only:
// a restarted server logs everyone out.
type consoleSessions struct {
	mu       sync.Mutex
	sessions map[string]*session
	links    map[string]time.Time
}

func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (cs *consoleSessions) add(se *session) (string, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	now := time.Now()
	for id, o := range cs.sessions {
		if now.After(o.expires) {
			delete(cs.sessions, id)
		}
	}
	if len(cs.sessions) >= maxSessions {
		return "", fmt.Errorf("console login: %d sessions open: %w", maxSessions, sandbox.ErrLimit)
	}
	if cs.sessions == nil {
		cs.sessions = map[string]*session{}
	}
	id := newToken()
	se.expires = now.Add(sessionTTL)
	cs.sessions[id] = se
	return id, nil
}

func (cs *consoleSessions) get(id string) *session {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	se := cs.sessions[id]
	if se == nil || time.Now().After(se.expires) {
		delete(cs.sessions, id)
		return nil
	}
	return se
}

func (cs *consoleSessions) drop(id string) {
	cs.mu.Lock()
	delete(cs.sessions, id)
	cs.mu.Unlock()
}

// newLink mints a one-time login link token for the local tenant.
func (cs *consoleSessions) newLink() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.links == nil {
		cs.links = map[string]time.Time{}
	}
	now := time.Now()
	for t, exp := range cs.links {
		if now.After(exp) {
			delete(cs.links, t)
		}
	}
	t := newToken()
	cs.links[t] = now.Add(loginLinkTTL)
	return t
}

// useLink consumes a login link token: true once, within its lifetime.
func (cs *consoleSessions) useLink(tok string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for t, exp := range cs.links {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			delete(cs.links, t)
			return time.Now().Before(exp)
		}
	}
	return false
}

// sameOrigin reports whether r's Origin (when the browser sent one) is
// this server as the browser reached it.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host && (u.Scheme == "http" || u.Scheme == "https")
}

var errConsoleCSRF = &httpError{api.CodePermissionDenied,
	fmt.Errorf("console session: request without the %s header or from another origin: %w", consoleHeader, sandbox.ErrPermission)}

// consoleCaller authenticates a request by its console cookie: the
// tenant and, for a key's session, the key. ok false: no session
// cookie; err: a cookie that does not authenticate this request.
func (s *Server) consoleCaller(r *http.Request) (tenant, key string, ok bool, err error) {
	c, cerr := r.Cookie(consoleCookie)
	if cerr != nil {
		return "", "", false, nil
	}
	ws := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	if !sameOrigin(r) || (!ws && r.Header.Get(consoleHeader) != "1") {
		return "", "", true, errConsoleCSRF
	}
	se := s.console.get(c.Value)
	if se == nil {
		return "", "", true, &httpError{api.CodeUnauthenticated,
			fmt.Errorf("console session expired or logged out: %w", sandbox.ErrPermission)}
	}
	return se.tenant, se.key, true, nil
}

// consoleRoutes registers the console's pages and its login endpoints.
func (s *Server) consoleRoutes(mux *http.ServeMux) {
	files := http.FileServerFS(ui.Dist())
	mux.HandleFunc("GET /ui/{path...}", func(w http.ResponseWriter, r *http.Request) {
		consoleHeaders(w)
		p := r.PathValue("path")
		if p == "" || path.Ext(p) == "" {
			p = "index.html" // a page of the console: the app routes it
		}
		if _, err := fs.Stat(ui.Dist(), p); err != nil {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + p
		if p == "index.html" {
			w.Header().Set("Cache-Control", "no-store")
			r2.URL.Path = "/"
		}
		files.ServeHTTP(w, r2)
	})
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	mux.HandleFunc("POST /ui/login", s.handleConsoleLogin)
	mux.HandleFunc("POST /ui/logout", s.handleConsoleLogout)
	mux.HandleFunc("GET /ui/session", s.authenticate(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"tenant": callerOf(r).tenant})
	}))
	mux.HandleFunc("POST /ui/links", s.handleConsoleLink)
}

func consoleHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// ConsoleLogin is the body of POST /ui/login: an API key or a login link's token.
type consoleLogin struct {
	Key  string `json:"key,omitempty"`
	Link string `json:"link,omitempty"`
}

func (s *Server) handleConsoleLogin(w http.ResponseWriter, r *http.Request) {
	consoleHeaders(w)
	if !sameOrigin(r) || r.Header.Get(consoleHeader) != "1" {
		s.writeError(w, r, errConsoleCSRF)
		return
	}
	var req consoleLogin
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil {
		s.writeError(w, r, errBadRequest("console login: want {\"key\": KEY}"))
		return
	}
	se := &session{}
	switch {
	case req.Key != "":
		tenant, err := s.store.Authenticate(r.Context(), strings.TrimSpace(req.Key))
		if err != nil {
			s.writeError(w, r, &httpError{api.CodeUnauthenticated, err})
			return
		}
		se.key, se.tenant = strings.TrimSpace(req.Key), tenant
	case req.Link != "" && s.console.useLink(req.Link):
		se.tenant = store.LocalTenant
	default:
		s.writeError(w, r, &httpError{api.CodeUnauthenticated,
			fmt.Errorf("console login: no API key, or the login link is used or expired: %w", sandbox.ErrPermission)})
		return
	}
	id, err := s.console.add(se)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(sessionTTL / time.Second)})
	writeJSON(w, http.StatusOK, map[string]string{"tenant": se.tenant})
}

func (s *Server) handleConsoleLogout(w http.ResponseWriter, r *http.Request) {
	consoleHeaders(w)
	if !sameOrigin(r) || r.Header.Get(consoleHeader) != "1" {
		s.writeError(w, r, errConsoleCSRF)
		return
	}
	if c, err := r.Cookie(consoleCookie); err == nil {
		s.console.drop(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

// handleConsoleLink mints a one-time login link for the local operator:
// only on the trusted socket (what `airlock console` calls).
func (s *Server) handleConsoleLink(w http.ResponseWriter, r *http.Request) {
	if trusted, _ := r.Context().Value(keyTrusted).(bool); !trusted {
		s.writeError(w, r, &httpError{api.CodePermissionDenied,
			fmt.Errorf("console links are made on the local socket only: %w", sandbox.ErrPermission)})
		return
	}
	s.httpMu.Lock()
	var base string
	if len(s.tcpAddrs) > 0 {
		// The first TCP listener; an unspecified address (0.0.0.0) is
		// reached on loopback by the local operator.
		host, port, _ := net.SplitHostPort(s.tcpAddrs[0].String())
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		base = "http://" + net.JoinHostPort(host, port)
	}
	s.httpMu.Unlock()
	tok := s.console.newLink()
	writeJSON(w, http.StatusOK, map[string]string{"token": tok, "path": "/ui/#login=" + tok, "base": base})
}
