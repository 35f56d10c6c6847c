package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// Connection bounds: what any client, authenticated or not, can hold.
const (
	// headerTimeout bounds reading a request's headers.
	headerTimeout = 10 * time.Second
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
)

// ConnLimits bound the connections of one listener.
type ConnLimits struct {
	// PerClient is the most connections one client address may hold
	// (before authentication); 0: none (the unix socket has no address).
	PerClient int
	// Total is the most connections the listener holds; 0: none.
	Total int
}

// DefaultTCPLimits are the limits of a TCP listener.
var DefaultTCPLimits = ConnLimits{PerClient: 64, Total: 4096}

// DefaultUnixLimits are the limits of the unix socket: its own budget, so
// a flood on TCP never locks the operator out.
var DefaultUnixLimits = ConnLimits{Total: 1024}

// limitListener accepts connections and closes at once those beyond its
// limits, so that descriptors never pile up in the accept queue or in
// the server: the client sees its connection closed.
type limitListener struct {
	net.Listener
	lim     ConnLimits
	metrics *serverMetrics

	mu     sync.Mutex
	total  int
	client map[string]int
}

func newLimitListener(ln net.Listener, lim ConnLimits, m *serverMetrics) *limitListener {
	return &limitListener{Listener: ln, lim: lim, metrics: m, client: map[string]int{}}
}

// clientOf is the address a per-client limit counts by (the host, not
// the port).
func clientOf(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return ""
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		who := clientOf(c)
		l.mu.Lock()
		over := l.lim.Total > 0 && l.total >= l.lim.Total ||
			l.lim.PerClient > 0 && who != "" && l.client[who] >= l.lim.PerClient
		if !over {
			l.total++
			if who != "" {
				l.client[who]++
			}
		}
		l.mu.Unlock()
		if over {
			l.metrics.connRefused.Inc()
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l, who: who}, nil
	}
}

func (l *limitListener) release(who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if who != "" {
		if l.client[who]--; l.client[who] <= 0 {
			delete(l.client, who)
		}
	}
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	who  string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.who) })
	return err
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
