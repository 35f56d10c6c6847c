package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
)

// Connection bounds: what any client, authenticated or not, can hold.
const (
	// DefaultHeadTimeout bounds reading a request's head (request line
	// and headers) from its first byte: a client that sends its headers
	// one byte at a time (a slowloris) loses its connection after it
	// (Config.HeadTimeout).
	DefaultHeadTimeout = 5 * time.Second
	// defaultIOTimeout bounds each wait for a request body's next bytes
	// and for a client to take the next bytes of a response: a client
	// that stops reading or sending for this long loses its connection
	// (Config.IOTimeout).
	defaultIOTimeout = 30 * time.Second
	// idleTimeout bounds a kept-alive connection between requests.
	idleTimeout = 60 * time.Second
	// drainTimeout bounds reading what is left of a body after the
	// handler answered (a refused request with a trickling body).
	drainTimeout = 5 * time.Second
	// refuseWrite bounds writing the short refusal a connection over a
	// limit gets before it is closed.
	refuseWrite = 100 * time.Millisecond
)

// ConnLimits bound the connections of one listener. A connection is
// anonymous until a request on it authenticates (an API key, a console
// session, a sandbox token); from then on it is its tenant's.
type ConnLimits struct {
	// PerPrefix is the most connections one client network may hold:
	// its /24 for IPv4, its /64 for IPv6 (one host usually holds a whole
	// /64, and a /24 is what one attacker gets cheaply); 0: none (behind a
	// reverse proxy every client has the proxy's address; the unix socket
	// has no address).
	PerPrefix int
	// PerTenant is the most connections one tenant's requests may hold;
	// 0: none.
	PerTenant int
	// Total is the most connections the listener holds; 0: none. When it
	// is reached, a new connection takes the place of the oldest anonymous
	// one (a legitimate client is anonymous only while it sends its first
	// request's head), and is refused only when every connection held is
	// a tenant's.
	Total int
}

// DefaultTCPLimits are the limits of a TCP listener.
var DefaultTCPLimits = ConnLimits{PerPrefix: 64, PerTenant: 256, Total: 4096}

// DefaultUnixLimits are the limits of the unix socket: its own budget, so
// a flood on TCP never locks the operator out.
var DefaultUnixLimits = ConnLimits{Total: 1024}

// limitListener accepts connections and closes at once those beyond its
// limits (after a short JSON refusal), so that descriptors never pile up
// in the accept queue or in the server.
type limitListener struct {
	net.Listener
	lim     ConnLimits
	metrics *serverMetrics

	mu     sync.Mutex
	total  int
	prefix map[string]int
	tenant map[string]int
	anon   list.List // *limitedConn not yet a tenant's, oldest first

	// refuseTLS, on a TLS listener (withTLS), is the configuration its
	// refusals are written with; refusing bounds how many at once.
	refuseTLS *tls.Config
	refusing  chan struct{}
}

func newLimitListener(ln net.Listener, lim ConnLimits, m *serverMetrics) *limitListener {
	return &limitListener{Listener: ln, lim: lim, metrics: m, prefix: map[string]int{}, tenant: map[string]int{}}
}

// prefixOf is the network a per-prefix limit counts by: the /24 of an
// IPv4 address (IPv4-mapped IPv6 included), the /64 of an IPv6 one.
func prefixOf(c net.Conn) string {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok || ta == nil {
		return ""
	}
	if v4 := ta.IP.To4(); v4 != nil {
		return (&net.IPNet{IP: v4.Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}).String()
	}
	return (&net.IPNet{IP: ta.IP.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, evicted, refusal := l.admit(c)
		if evicted != nil {
			l.metrics.connEvicted.Inc()
			evicted.Conn.Close()
		}
		if lc == nil {
			l.metrics.connRefused.Inc()
			if l.refuseTLS != nil {
				l.refuseOverTLS(c, refusal)
			} else {
				refuse(c, refusal)
			}
			continue
		}
		return lc, nil
	}
}

// admit counts c in, or says why not (a JSON error body). When the total
// is reached it evicts the oldest anonymous connection, which the caller
// closes.
func (l *limitListener) admit(c net.Conn) (lc, evicted *limitedConn, refusal []byte) {
	who := prefixOf(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lim.PerPrefix > 0 && who != "" && l.prefix[who] >= l.lim.PerPrefix {
		return nil, nil, refusalBody(http.StatusTooManyRequests, api.CodeLimitExceeded,
			fmt.Sprintf("too many connections from network %s (limit %d per client network): close some and retry", who, l.lim.PerPrefix))
	}
	if l.lim.Total > 0 && l.total >= l.lim.Total {
		if l.anon.Len() == 0 {
			return nil, nil, refusalBody(http.StatusServiceUnavailable, api.CodeUnavailable,
				fmt.Sprintf("the server holds its most connections (%d): retry later", l.lim.Total))
		}
		evicted = l.anon.Front().Value.(*limitedConn)
		l.releaseLocked(evicted)
	}
	lc = &limitedConn{Conn: c, l: l, prefix: who}
	l.total++
	if who != "" {
		l.prefix[who]++
	}
	lc.anon = l.anon.PushBack(lc)
	return lc, evicted, nil
}

// refusalBody is a whole HTTP/1.1 answer with an API error.
func refusalBody(status int, code, msg string) []byte {
	body, _ := json.Marshal(api.ErrorBody{Error: api.ErrorInfo{Code: code, Message: msg}})
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\nRetry-After: 1\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// refuse gives c its refusal if it takes it at once, and closes it. The
// answer is written before the request is read: a client whose request
// is still unread may see its connection reset instead.
func refuse(c net.Conn, answer []byte) {
	_ = c.SetWriteDeadline(time.Now().Add(refuseWrite))
	_, _ = c.Write(answer)
	c.Close()
}

// bind makes c a connection of tenant, within the per-tenant limit.
func (l *limitListener) bind(c *limitedConn, tenant string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released || c.tenant == tenant {
		return nil
	}
	if l.lim.PerTenant > 0 && l.tenant[tenant] >= l.lim.PerTenant {
		return fmt.Errorf("too many connections of tenant %s (limit %d per tenant): close some and retry: %w", tenant, l.lim.PerTenant, sandbox.ErrLimit)
	}
	l.unbindLocked(c)
	c.tenant = tenant
	l.tenant[tenant]++
	if c.anon != nil {
		l.anon.Remove(c.anon)
		c.anon = nil
	}
	return nil
}

func (l *limitListener) unbindLocked(c *limitedConn) {
	if c.tenant == "" {
		return
	}
	if l.tenant[c.tenant]--; l.tenant[c.tenant] <= 0 {
		delete(l.tenant, c.tenant)
	}
	c.tenant = ""
}

// releaseLocked stops counting c (once).
func (l *limitListener) releaseLocked(c *limitedConn) {
	if c.released {
		return
	}
	c.released = true
	l.total--
	if c.prefix != "" {
		if l.prefix[c.prefix]--; l.prefix[c.prefix] <= 0 {
			delete(l.prefix, c.prefix)
		}
	}
	l.unbindLocked(c)
	if c.anon != nil {
		l.anon.Remove(c.anon)
		c.anon = nil
	}
}

// limitedConn is a counted connection; its fields are the listener's
// (under its mu).
type limitedConn struct {
	net.Conn
	l        *limitListener
	prefix   string
	tenant   string
	anon     *list.Element
	released bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}

type connKey struct{}

// withConn is the http.Server's ConnContext: handlers find their
// connection's limits.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn() // TLS served above the bounds (ServeDoor)
	}
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// bindConn makes r's connection its tenant's (a per-tenant limit).
func bindConn(r *http.Request, tenant string) error {
	lc, _ := r.Context().Value(connKey{}).(*limitedConn)
	if lc == nil {
		return nil
	}
	return lc.l.bind(lc, tenant)
}

// withDeadlines gives every request progress deadlines: each read of its
// body must see bytes within ioTimeout, each write of its answer must be
// taken within ioTimeout; a handler that waits (a long exec, a follow)
// is not bounded, the client's silence is. After the handler, what is
// left of the body is drained within drainTimeout at most.
func withDeadlines(ioTimeout time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, d: ioTimeout}
		}
		h.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, d: ioTimeout}, r)
		_ = rc.SetReadDeadline(time.Now().Add(drainTimeout))
	})
}

type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
	d  time.Duration
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		// The body is done (or failed): the server's background read
		// that notices a client going away must not time out meanwhile.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter sets the write deadline before each write. It keeps
// http.ResponseController working (Unwrap) for flushes and hijacks.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) WriteHeader(code int) {
	if code == http.StatusSwitchingProtocols {
		// A WebSocket (the PTY) takes the connection over: it must not
		// keep a deadline of ours.
		_ = w.rc.SetWriteDeadline(time.Time{})
	} else {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	_ = w.rc.Flush()
}

// keyWatch ends the requests (streams above all) of API keys revoked
// while they run: each key in use is checked against the store every
// revokeCheck, whatever process revoked it.
type keyWatch struct {
	mu   sync.Mutex
	keys map[string]*keyRequests
}

type keyRequests struct {
	cancels map[*context.CancelFunc]struct{}
}

const revokeCheck = time.Second

// track registers a request made with key; call the returned func when
// it ends.
func (k *keyWatch) track(key string, cancel context.CancelFunc) func() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[string]*keyRequests{}
	}
	rs := k.keys[key]
	if rs == nil {
		rs = &keyRequests{cancels: map[*context.CancelFunc]struct{}{}}
		k.keys[key] = rs
	}
	p := &cancel
	rs.cancels[p] = struct{}{}
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(rs.cancels, p)
		if len(rs.cancels) == 0 && k.keys[key] == rs {
			delete(k.keys, key)
		}
	}
}

// sweep cancels every request of a key that no longer authenticates.
func (s *Server) sweepKeys(ctx context.Context) {
	s.keyWatch.mu.Lock()
	keys := make([]string, 0, len(s.keyWatch.keys))
	for k := range s.keyWatch.keys {
		keys = append(keys, k)
	}
	s.keyWatch.mu.Unlock()
	for _, k := range keys {
		_, err := s.store.Authenticate(ctx, k)
		if err == nil || !errors.Is(err, sandbox.ErrPermission) {
			continue // valid, or the store could not say: keep it
		}
		s.keyWatch.mu.Lock()
		if rs := s.keyWatch.keys[k]; rs != nil {
			for c := range rs.cancels {
				(*c)()
			}
		}
		delete(s.keyWatch.keys, k)
		s.keyWatch.mu.Unlock()
		s.log.Info("API key revoked: its open requests were ended")
	}
}

func (s *Server) keyLoop() {
	defer s.wg.Done()
	t := time.NewTicker(revokeCheck)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			s.sweepKeys(ctx)
			cancel()
		}
	}
}
