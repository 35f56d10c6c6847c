package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
)

// protos is the ALPN list of an intercepted connection.
func protos(h2 bool) []string {
	if h2 {
		return []string{"h2", "http/1.1"}
	}
	return []string{"http/1.1"}
}

// serveH2 relays HTTP/2 between the sandbox (cTLS, h2 negotiated) and the
// origin (upTLS, h2 negotiated) with the standard library's HTTP/2 server
// and transport, each request checked like an HTTP/1.1 one (:authority
// as Host, :path as the request-target).
func (p *Proxy) serveH2(ctx context.Context, cTLS *tls.Conn, upTLS *tls.Conn, a *attempt) {
	var once sync.Once
	tr := &http.Transport{
		ForceAttemptHTTP2: true,
		DialTLSContext: func(context.Context, string, string) (net.Conn, error) {
			var c net.Conn
			once.Do(func() { c = upTLS })
			if c == nil {
				return nil, errors.New("egress: one upstream connection per intercepted stream")
			}
			return c, nil
		},
	}
	defer tr.CloseIdleConnections()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.relayH2(w, r, tr, a)
	})}
	ln := &oneConnListener{c: cTLS, done: make(chan struct{})}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed || s == http.StateHijacked {
			ln.Close()
		}
	}
	srv.Serve(ln)
}

func (p *Proxy) relayH2(w http.ResponseWriter, r *http.Request, tr *http.Transport, a *attempt) {
	if !hostAgrees(r.Host, a.host, a.port, 443) {
		writeH2Status(w, http.StatusMisdirectedRequest, ":authority "+quoteHost(r.Host)+" does not match the TLS target")
		return
	}
	if d := p.checkRequest(a, r, rawRequest{method: r.Method, target: r.RequestURI}, true); d.why != "" {
		why := r.Method + " refused: " + d.why
		if d.hint != "" {
			why += "; to allow it: " + d.hint
		}
		writeH2Status(w, http.StatusForbidden, why)
		return
	}
	hits := replaceHeaders(r.Header, p.secrets, a.host.Name, a.port)
	for _, s := range containsPlaceholder([]byte(r.URL.String()), p.secrets) {
		hits = append(hits, headerHit{secret: s})
	}
	p.noteLeaks(a, hits)
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "https", canonicalAuthority(a.host, a.port, false)
	out.Host = out.URL.Host
	a.requests.Add(1)
	resp, err := tr.RoundTrip(out)
	if err != nil {
		writeH2Status(w, http.StatusBadGateway, "upstream: "+err.Error())
		return
	}
	defer resp.Body.Close()
	scrubHeaders(resp.Header, p.secrets)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for k := range resp.Trailer {
		w.Header().Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			rc.Flush()
		}
		if err != nil {
			break
		}
	}
	// Trailers the origin did not announce (gRPC's grpc-status usually)
	// are known only now; TrailerPrefix sends those as well.
	scrubHeaders(resp.Trailer, p.secrets)
	for k, vs := range resp.Trailer {
		w.Header()[http.TrailerPrefix+k] = vs
	}
}

func writeH2Status(w http.ResponseWriter, code int, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Airlock-Egress", "denied")
	w.WriteHeader(code)
	io.WriteString(w, "airlock egress: "+why+"\n")
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
	shut sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.shut.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return dummyAddr{} }
