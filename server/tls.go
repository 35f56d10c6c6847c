package server

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// HTTP/2 bounds: what one connection may make the server hold, whatever
// its client sends. The per-connection, per-network and per-tenant limits
// of the listener and the per-tenant in-flight cap (Config.TenantRequests)
// hold for HTTP/2 connections as for HTTP/1.1 ones.
const (
	// h2MaxStreams is the most requests one HTTP/2 connection may have
	// running; a client that opens more gets the extra streams reset.
	h2MaxStreams = 32
	// h2ConnWindow and h2StreamWindow bound the request-body bytes the
	// server buffers for a connection and for one of its streams before
	// its handlers read them (flow control: a client may not send more).
	h2ConnWindow   = 1 << 20
	h2StreamWindow = 256 << 10
	// h2HeaderTable bounds the header compression table a client may make
	// the server keep (HPACK's default).
	h2HeaderTable = 4096
)

// refuseTLSTimeout bounds the handshake and the write of a refusal on a
// TLS listener; at most refuseTLSAtOnce are under way, the connections
// beyond are closed without a word.
const (
	refuseTLSTimeout = time.Second
	refuseTLSAtOnce  = 16
)

// ServeTLS serves the API on ln over TLS with cfg, as an untrusted TCP
// listener (every request needs a key): HTTP/2 when the client offers it
// by ALPN ("h2"), HTTP/1.1 otherwise. Connections are counted below TLS,
// so a client that never finishes its handshake is still one of its
// network's and evictable as anonymous.
func (s *Server) ServeTLS(ln net.Listener, cfg *tls.Config) error {
	ll := newLimitListener(ln, s.cfg.TCPLimits, s.metrics)
	return s.serveHTTP(ll.withTLS(cfg), s.withTrust(false, s.handler), idleTimeout, ln.Addr())
}

// withTLS is l under TLS with cfg, offering HTTP/2 and HTTP/1.1 by ALPN
// unless cfg names its own protocols; l's refusals are then written
// over TLS, in HTTP/1.1.
func (l *limitListener) withTLS(cfg *tls.Config) net.Listener {
	cfg = cfg.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	l.refuseTLS = cfg.Clone()
	l.refuseTLS.NextProtos = []string{"http/1.1"}
	l.refusing = make(chan struct{}, refuseTLSAtOnce)
	return tls.NewListener(l, cfg)
}

// refuseOverTLS gives c its refusal over TLS in a goroutine of its own
// (a handshake must not hold the accept loop), bounded in time and in
// number; beyond the number c is closed at once.
func (l *limitListener) refuseOverTLS(c net.Conn, answer []byte) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		_ = c.SetDeadline(time.Now().Add(refuseTLSTimeout))
		tc := tls.Server(c, l.refuseTLS)
		_, _ = tc.Write(answer)
		tc.Close()
	}()
}

// h2Config is the HTTP/2 configuration of every listener (used only on
// TLS ones, where ALPN picks it); ioTimeout closes a connection whose
// client takes none of the bytes the server has for it.
func h2Config(ioTimeout time.Duration, countError func(string)) *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams:          h2MaxStreams,
		MaxReceiveBufferPerConnection: h2ConnWindow,
		MaxReceiveBufferPerStream:     h2StreamWindow,
		MaxDecoderHeaderTableSize:     h2HeaderTable,
		MaxEncoderHeaderTableSize:     h2HeaderTable,
		WriteByteTimeout:              ioTimeout,
		CountError:                    countError,
	}
}

// protocols are HTTP/1.1 everywhere and HTTP/2 over TLS.
func protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	return p
}
