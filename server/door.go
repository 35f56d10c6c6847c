package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/server/token"
)

// ServeDoor answers requests of another door onto the API (the E2B
// adapter, which calls /v1 for its callers) on ln until Shutdown, with
// the connection bounds of the API's own TCP listeners: per client
// network, per tenant, a total that evicts anonymous connections first,
// and the head deadline. credential returns the credential a request
// carries as the door forwards it to /v1 (an API key or a sandbox
// token; "" for none): a valid one makes the request's connection its
// tenant's. As on the API's own listeners, each wait for a request
// body's next bytes, and for the client to take the next response bytes,
// is bounded by the I/O timeout (Config.IOTimeout). tlsConfig, when set,
// serves TLS above the bounds, so a connection is counted before its
// handshake.
func (s *Server) ServeDoor(ln net.Listener, tlsConfig *tls.Config, h http.Handler, credential func(*http.Request) string) error {
	ll := newLimitListener(ln, s.cfg.TCPLimits, s.metrics)
	var cl net.Listener = ll
	if tlsConfig != nil {
		cl = ll.withTLS(tlsConfig)
	}
	return s.serveHTTP(cl, s.bindDoor(h, credential), doorIdleTimeout, nil)
}

// bindDoor makes the connection of a request with a valid credential its
// tenant's before h answers it (once per connection); a tenant over its
// connection limit gets 429 and the connection closed. An invalid
// credential is left to h, which refuses it in its own words.
func (s *Server) bindDoor(h http.Handler, credential func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(connKey{}).(*limitedConn)
		if lc != nil && !lc.bound() {
			if tenant := s.credentialTenant(r.Context(), credential(r)); tenant != "" {
				if err := lc.l.bind(lc, tenant); err != nil {
					w.Header().Set("Connection", "close")
					s.writeError(w, r, err)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// credentialTenant is the tenant of an API key or a sandbox token; ""
// when cred is neither.
func (s *Server) credentialTenant(ctx context.Context, cred string) string {
	if cred == "" {
		return ""
	}
	if strings.HasPrefix(cred, token.SandboxPrefix) {
		_, _, tenant, err := s.portTokens.CheckSandbox(cred)
		if err != nil {
			return ""
		}
		return tenant
	}
	tenant, err := s.store.Authenticate(ctx, cred)
	if err != nil || tenant == "" {
		return ""
	}
	return tenant
}

// bound reports whether c is a tenant's.
func (c *limitedConn) bound() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.tenant != "" || c.released
}

// doorIdleTimeout bounds a kept-alive connection of a door between
// requests (E2B's SDKs keep theirs longer than the API's clients).
const doorIdleTimeout = 90 * time.Second
