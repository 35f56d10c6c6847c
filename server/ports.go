package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/token"
)

// Port routes reach a TCP port on a sandbox's own loopback through its
// agent (sandbox.PortDialer): nothing is bound on the host per sandbox and
// the sandbox needs no network interface. The server checks who may
// reach it; the agent only connects to 127.0.0.1 inside.

// portsPattern is the path-routed proxy, every method. It is not in
// apiRoutes: it authenticates by key or by port token (portCaller).
const portsPattern = "/v1/sandboxes/{id}/ports/{port}/{path...}"

// portTokenCookie carries a port token the browser got as ?token=.
const portTokenCookie = "airlock_port_token"

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != s {
		return 0, errBadRequest("port %q: want 1..65535", s)
	}
	return p, nil
}

// newPortTransport is the proxy's transport: its "host" is a sandbox ID,
// its connections dial streams of that sandbox's agent.
func (s *Server) newPortTransport() *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			id, ps, _ := net.SplitHostPort(addr)
			port, err := strconv.Atoi(ps)
			if err != nil {
				return nil, fmt.Errorf("dial port %q: %w", addr, sandbox.ErrInvalid)
			}
			l := s.liveByID(id)
			if l == nil {
				return nil, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrClosed)
			}
			return dialPort(ctx, l, port)
		},
		MaxIdleConnsPerHost: 4, // each idle one holds a dial stream (64 per sandbox)
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
}

func dialPort(ctx context.Context, l *live, port int) (net.Conn, error) {
	d, ok := l.sb.(sandbox.PortDialer)
	if !ok {
		return nil, fmt.Errorf("port %d of sandbox %q: backend %s has no port routes: %w", port, l.sb.ID(), l.backend, sandbox.ErrNotSupported)
	}
	c, err := d.DialPort(ctx, port)
	if err != nil {
		return nil, fmt.Errorf("port %d of sandbox %q: %w", port, l.sb.ID(), err)
	}
	return c, nil
}

// handlePortProxy is the path-routed proxy: /v1/sandboxes/ID/ports/PORT/REST
// goes to /REST of the port, the prefix told in X-Forwarded-Prefix.
func (s *Server) handlePortProxy(w http.ResponseWriter, r *http.Request) {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	prefix := "/v1/sandboxes/" + id + "/ports/" + strconv.Itoa(port)
	rest := "/"
	// The escaped rest as the client sent it: /v1/sandboxes/ID/ports/PORT/REST.
	if parts := strings.SplitN(r.URL.EscapedPath(), "/", 7); len(parts) == 7 {
		rest += parts[6]
	}
	s.servePort(w, r, id, port, prefix, rest)
}

// servePort authorises r for port of sandbox id and proxies it there.
func (s *Server) servePort(w http.ResponseWriter, r *http.Request, id string, port int, prefix, rest string) {
	s.portCaller(w, r, id, port, prefix, func(w http.ResponseWriter, r *http.Request, l *live) {
		defer l.use()()
		if _, ok := l.sb.(sandbox.PortDialer); !ok {
			_, err := dialPort(r.Context(), l, port)
			s.writeError(w, r, err)
			return
		}
		if _, err := r.Cookie(consoleCookie); err == nil {
			// Opened from the console, on its origin: the app's pages
			// run in an opaque origin of their own, so their script
			// cannot use the console's session.
			w.Header().Set("Content-Security-Policy", portSandboxCSP)
		}
		s.portProxy(id, port, prefix, rest, r.URL.Query()).ServeHTTP(w, r)
	})
}

// portProxy forwards to rest (escaped) of port in sandbox id, with query q
// less the token, never passing the caller's credentials on.
func (s *Server) portProxy(id string, port int, prefix, rest string, q url.Values) *httputil.ReverseProxy {
	q.Del("token")
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", net.JoinHostPort(id, strconv.Itoa(port))
			pr.Out.URL.RawPath = rest
			pr.Out.URL.Path, _ = url.PathUnescape(rest)
			pr.Out.URL.RawQuery = q.Encode()
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			if prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
			}
			// The app never sees the caller's credentials.
			pr.Out.Header.Del("Authorization")
			stripCookie(pr.Out, portTokenCookie)
			stripCookie(pr.Out, consoleCookie)
		},
		// The app may not set cookies named like airlock's: on the path
		// route every sandbox's ports share the server's origin, and an
		// app's airlock_port_token scoped to another sandbox's port path
		// would shadow that port's own (issue 24 item 9).
		ModifyResponse: func(resp *http.Response) error {
			stripAirlockSetCookies(resp.Header)
			return nil
		},
		Transport: s.portTransport,
		// Streams (SSE, chunked answers) are flushed as they come: the
		// proxy does that for answers of unknown length by itself.
		FlushInterval: 0,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			s.log.Debug("port proxy failed", "sandbox", id, "port", port, "err", err)
			code := api.CodeUnavailable
			if errors.Is(err, sandbox.ErrClosed) {
				code = api.CodeClosed
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorInfo{Code: code,
				Message: fmt.Sprintf("port %d of sandbox %q: %v", port, id, err)}})
		},
	}
}

// stripAirlockSetCookies drops the Set-Cookie headers of h that name a
// cookie starting with "airlock" (any case, with or without a __Host- or
// __Secure- prefix).
func stripAirlockSetCookies(h http.Header) {
	var keep []string
	for _, v := range h.Values("Set-Cookie") {
		name, _, _ := strings.Cut(v, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		name = strings.TrimPrefix(strings.TrimPrefix(name, "__host-"), "__secure-")
		if !strings.HasPrefix(name, "airlock") {
			keep = append(keep, v)
		}
	}
	h.Del("Set-Cookie")
	for _, v := range keep {
		h.Add("Set-Cookie", v)
	}
}

// portCookieToken is the port token among r's airlock_port_token cookies
// that is good for port of sandbox id (a browser sends every cookie of
// that name whose path covers the request: one planted by script for a
// longer path must not shadow the genuine one); else the first, to be
// refused with its reason.
func (s *Server) portCookieToken(r *http.Request, id string, port int) string {
	first := ""
	for _, c := range r.CookiesNamed(portTokenCookie) {
		if first == "" {
			first = c.Value
		}
		if s.portTokens.Check(c.Value, id, port, time.Now()) == nil {
			return c.Value
		}
	}
	return first
}

// stripCookie removes cookie name from r's Cookie headers.
func stripCookie(r *http.Request, name string) {
	cs := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cs {
		if c.Name != name {
			r.AddCookie(c)
		}
	}
}

// portCaller decides who may reach port of sandbox id and calls next for
// them: a request with an API key (or on the trusted socket) as its
// tenant, else one with a port token (?token=, then remembered in a
// cookie) for exactly this sandbox and port. On refusal it answers.
func (s *Server) portCaller(w http.ResponseWriter, r *http.Request, id string, port int, prefix string, next func(http.ResponseWriter, *http.Request, *live)) {
	tok, fromQuery := r.URL.Query().Get("token"), true
	if tok == "" {
		fromQuery = false
		tok = s.portCookieToken(r, id, port)
	}
	if tok == "" && r.Header.Get("Authorization") == "" {
		if l := s.liveByID(id); l != nil && l.publicPorts() {
			// Public ports: anyone who knows the sandbox's ID.
			l, err := s.lookupResuming(r.Context(), l.tenant(), id)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			next(w, r, l)
			return
		}
	}
	if tok == "" || r.Header.Get("Authorization") != "" {
		s.authenticate(func(w http.ResponseWriter, r *http.Request) {
			l, err := s.lookupLive(r.Context(), callerOf(r).tenant, id)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			next(w, r, l)
		})(w, r)
		return
	}
	switch err := s.portTokens.Check(tok, id, port, time.Now()); {
	case errors.Is(err, token.ErrScope):
		s.writeError(w, r, &httpError{api.CodePermissionDenied, fmt.Errorf("port %d of sandbox %q: %w: %w", port, id, err, sandbox.ErrPermission)})
		return
	case err != nil:
		s.writeError(w, r, &httpError{api.CodeUnauthenticated, fmt.Errorf("port %d of sandbox %q: %w: %w", port, id, err, sandbox.ErrPermission)})
		return
	}
	// A genuine token was minted by the sandbox's tenant.
	owner := ""
	if l := s.liveByID(id); l != nil {
		owner = l.tenant()
	}
	l, err := s.lookup(owner, id)
	if err == nil {
		// The connection is the sandbox's tenant's from now on: counted
		// against its per-tenant limit, never evicted as anonymous.
		err = bindConn(r, owner)
	}
	if err != nil {
		if errors.Is(err, sandbox.ErrLimit) {
			w.Header().Set("Connection", "close")
		}
		s.writeError(w, r, err)
		return
	}
	// What the token's visitors run counts as its tenant's requests.
	release, err := s.inflight.acquire(owner, s.cfg.TenantRequests)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	if fromQuery {
		exp, _ := tokenExpiry(tok)
		http.SetCookie(w, &http.Cookie{Name: portTokenCookie, Value: tok, Path: prefix + "/",
			MaxAge: max(1, int(time.Until(exp).Seconds())), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	}
	next(w, r, l)
}

func tokenExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 4 {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(parts[2], 10, 64)
	return time.Unix(n, 0), err == nil
}

// handlePortToken mints a token for one port of the caller's sandbox.
func (s *Server) handlePortToken(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.PortTokenRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if err := checkPort(req.Port); err != nil {
		s.writeError(w, r, err)
		return
	}
	ttl := req.TTL.D()
	switch {
	case ttl == 0:
		ttl = token.DefaultPortTTL
	case ttl < time.Second || ttl > token.MaxPortTTL:
		s.writeError(w, r, errBadRequest("port token ttl %s: want 1s..%s", ttl, token.MaxPortTTL))
		return
	}
	id := l.sb.ID()
	exp := time.Now().Add(ttl).Truncate(time.Second)
	tok := s.portTokens.Mint(id, req.Port, exp)
	out := api.PortToken{Port: req.Port, Token: tok, ExpiresAt: exp.UTC(),
		URL: fmt.Sprintf("/v1/sandboxes/%s/ports/%d/?token=%s", id, req.Port, tok)}
	if d := s.cfg.PreviewDomain; d != "" {
		out.PreviewURL = fmt.Sprintf("%s://%d-%s.%s/?token=%s", s.previewScheme(), req.Port, id, d, tok)
	}
	s.events.emit(audit.Event{Sandbox: id, Type: audit.TypeExec, Message: "port token minted through the API",
		Fields: map[string]any{"port": req.Port, "ttl": ttl.String(), "tenant": callerOf(r).tenant}})
	writeJSON(w, http.StatusCreated, out)
}

func checkPort(p int) error {
	if p < 1 || p > 65535 {
		return errBadRequest("port %d: want 1..65535", p)
	}
	return nil
}

func (s *Server) previewScheme() string {
	if s.cfg.PreviewScheme != "" {
		return s.cfg.PreviewScheme
	}
	return "http"
}

// previewTarget parses a preview host "PORT-ID.DOMAIN" (any port of the
// Host header dropped); ok false for any other host.
func (s *Server) previewTarget(host string) (id string, port int, ok bool) {
	d := s.cfg.PreviewDomain
	if d == "" {
		return "", 0, false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, found := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(d))
	if !found || strings.Contains(label, ".") {
		return "", 0, false
	}
	ps, id, found := strings.Cut(label, "-")
	if !found || id == "" {
		return "", 0, false
	}
	p, err := parsePort(ps)
	if err != nil {
		return "", 0, false
	}
	return id, p, true
}

// handleTCP carries raw bytes between a WebSocket (binary messages) and a
// port of the sandbox: what `airlock sandbox port-forward` rides on.
func (s *Server) handleTCP(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Dial first, so nothing listening is an error answer, not a socket
	// that closes at once.
	up, err := dialPort(r.Context(), l, port)
	if err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			err = &httpError{api.CodeUnavailable, err}
		}
		s.writeError(w, r, err)
		return
	}
	defer up.Close()
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the request
	}
	defer conn.CloseNow()
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeExec, Message: "port forward through the API",
		Fields: map[string]any{"port": port, "tenant": callerOf(r).tenant}})
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	nc := websocket.NetConn(ctx, conn, websocket.MessageBinary)
	go func() {
		select {
		case <-l.gone:
		case <-ctx.Done():
		}
		nc.Close()
		up.SetReadDeadline(time.Now())
	}()
	done := make(chan struct{})
	go func() {
		io.Copy(nc, up) // the app closed, or the sandbox ended
		nc.Close()
		close(done)
	}()
	io.Copy(up, nc) // the client closed
	up.Close()      // half-close: the app reads EOF
	up.SetReadDeadline(time.Now())
	<-done
}
