package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/policy"
)

// tunnel carries an allowed CONNECT or SOCKS5 connection. For port 443 it
// first reads the TLS ClientHello and requires its SNI to name the target;
// for the hosts of a secret it terminates TLS (see mitm).
func (p *Proxy) tunnel(ctx context.Context, c *client, a *attempt, up net.Conn) {
	c.stopTimer()
	secretHost := !a.host.IsIP() && p.secretHost(a.host.Name, a.port)
	ruled := p.policy().hasRules(a.host, a.port)
	if a.port != 443 && !secretHost && !ruled {
		p.splice(c, a, up, nil)
		return
	}
	// The client speaks first in TLS; give it the header timeout.
	t := time.AfterFunc(headerTimeout, func() { c.rwc.Close() })
	hello, seen, err := peekClientHello(c.br)
	t.Stop()
	if err != nil {
		up.Close()
		a.reason = "not a TLS ClientHello: " + err.Error()
		if len(seen) == 0 {
			a.reason = "no TLS ClientHello"
		}
		p.deny(a)
		return
	}
	if why := sniMismatch(hello.ServerName, a.host); why != "" {
		up.Close()
		a.reason = why
		p.deny(a)
		return
	}
	replay := &replayConn{r: io.MultiReader(bytes.NewReader(seen), c.br), rwc: c.rwc}
	if secretHost || ruled {
		a.mitm = true
		// HTTP/2 is offered upstream only when the client offered it and the
		// host has request rules (the secret-only path stays HTTP/1.1).
		h2 := ruled && slices.Contains(hello.SupportedProtos, "h2")
		p.mitm(ctx, c, replay, a, up, h2)
		return
	}
	p.splice(c, a, up, replay)
}

// secretHost reports whether any secret may be sent to name:port.
func (p *Proxy) secretHost(name string, port uint16) bool {
	for _, s := range p.secrets {
		if s.allowedFor(name, port) {
			return true
		}
	}
	return false
}

// sniMismatch compares a ClientHello's SNI with the target. A missing SNI
// is accepted only for IP-literal targets (clients send no SNI for IPs);
// for names it is refused, since the server behind the address would pick
// a virtual host the policy never saw.
func sniMismatch(sni string, target policy.Host) string {
	if sni == "" {
		if target.IsIP() {
			return ""
		}
		return "TLS ClientHello without SNI for a named target"
	}
	h, err := policy.NormalizeHost(sni)
	if err != nil {
		return "bad SNI " + quoteHost(sni)
	}
	if h != target {
		return "TLS SNI " + quoteHost(sni) + " differs from target " + target.String()
	}
	return ""
}

var errHelloSeen = errors.New("client hello seen")

// maxHelloBytes bounds how much is read looking for a ClientHello.
const maxHelloBytes = 64 << 10

// peekClientHello reads the TLS ClientHello from r with crypto/tls's own
// parser and returns it with every byte read (to be replayed).
func peekClientHello(r io.Reader) (*tls.ClientHelloInfo, []byte, error) {
	var seen bytes.Buffer
	var hello *tls.ClientHelloInfo
	conn := &readOnlyConn{r: io.TeeReader(io.LimitReader(r, maxHelloBytes), &seen)}
	err := tls.Server(conn, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			hello = &tls.ClientHelloInfo{ServerName: h.ServerName, SupportedProtos: h.SupportedProtos}
			return nil, errHelloSeen
		},
	}).Handshake()
	if hello == nil {
		if err == nil {
			err = errors.New("no ClientHello")
		}
		return nil, seen.Bytes(), err
	}
	return hello, seen.Bytes(), nil
}

// readOnlyConn feeds crypto/tls while it parses a ClientHello; what it
// would write (an alert) goes nowhere.
type readOnlyConn struct {
	r io.Reader
}

func (c *readOnlyConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *readOnlyConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *readOnlyConn) Close() error                     { return nil }
func (c *readOnlyConn) LocalAddr() net.Addr              { return dummyAddr{} }
func (c *readOnlyConn) RemoteAddr() net.Addr             { return dummyAddr{} }
func (c *readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c *readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c *readOnlyConn) SetWriteDeadline(time.Time) error { return nil }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "egress" }
func (dummyAddr) String() string  { return "sandbox" }

// replayConn is the client stream as a net.Conn, replaying what was peeked.
type replayConn struct {
	r   io.Reader
	rwc io.ReadWriteCloser
}

func (c *replayConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *replayConn) Write(b []byte) (int, error) { return c.rwc.Write(b) }
func (c *replayConn) Close() error                { return c.rwc.Close() }
func (c *replayConn) LocalAddr() net.Addr         { return dummyAddr{} }
func (c *replayConn) RemoteAddr() net.Addr        { return dummyAddr{} }
func (c *replayConn) SetDeadline(t time.Time) error {
	if d, ok := c.rwc.(interface{ SetDeadline(time.Time) error }); ok {
		return d.SetDeadline(t)
	}
	return nil
}
func (c *replayConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.rwc.(interface{ SetReadDeadline(time.Time) error }); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}
func (c *replayConn) SetWriteDeadline(t time.Time) error {
	if d, ok := c.rwc.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return d.SetWriteDeadline(t)
	}
	return nil
}

// splice copies both ways until either side is done, then closes both and
// records the attempt. from, when set, replaces the client's reader.
func (p *Proxy) splice(c *client, a *attempt, up net.Conn, from io.Reader) {
	if !p.track(a, func() { up.Close(); c.rwc.Close() }) {
		up.Close()
		a.reason = "policy changed"
		p.deny(a)
		return
	}
	if from == nil {
		from = c.br
	}
	copyBoth(c.rwc, from, up, up)
	p.finish(a)
}

// copyBoth relays client<->server: client's input is from, server's is up.
// When the client finishes sending, the server gets a half-close; when the
// server finishes, both are closed.
func copyBoth(cw io.WriteCloser, from io.Reader, up io.ReadWriteCloser, upr io.Reader) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(up, from)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			up.Close()
		}
	}()
	io.Copy(cw, upr)
	cw.Close()
	up.Close()
	wg.Wait()
}

// splice for an upgraded plain/MITM HTTP connection.
func splice(c *client, up net.Conn, upr *bufio.Reader) {
	copyBoth(c.rwc, c.br, up, upr)
}

// mitm terminates the client's TLS with a leaf minted by the sandbox CA,
// opens verified TLS to the real server over the checked connection, and
// relays HTTP/1.1 requests, replacing secret placeholders in headers.
func (p *Proxy) mitm(ctx context.Context, c *client, cconn net.Conn, a *attempt, raw net.Conn, h2 bool) {
	if !p.track(a, func() { raw.Close(); c.rwc.Close() }) {
		raw.Close()
		a.reason = "policy changed"
		p.deny(a)
		return
	}
	defer p.finish(a)
	defer raw.Close()
	hctx, cancel := context.WithTimeout(ctx, headerTimeout)
	defer cancel()
	upTLS := tls.Client(raw, &tls.Config{
		ServerName: a.host.String(), // an address is checked against the certificate's IP SANs
		RootCAs:    p.rootCAs,
		NextProtos: protos(h2),
		MinVersion: tls.VersionTLS12,
	})
	if err := upTLS.HandshakeContext(hctx); err != nil {
		a.reason = "upstream TLS: " + err.Error()
		p.log.Warn("egress: upstream TLS failed", "host", a.host.Name, "err", err)
		return
	}
	leaf, err := p.ca.leaf(a.host.String())
	if err != nil {
		a.reason = err.Error()
		return
	}
	upH2 := upTLS.ConnectionState().NegotiatedProtocol == "h2"
	cTLS := tls.Server(cconn, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   protos(upH2),
		MinVersion:   tls.VersionTLS12,
	})
	if err := cTLS.HandshakeContext(hctx); err != nil {
		a.reason = "sandbox TLS: " + err.Error()
		return
	}
	cancel()
	if upH2 {
		if cTLS.ConnectionState().NegotiatedProtocol != "h2" {
			a.reason = "sandbox did not speak HTTP/2 after offering it"
			return
		}
		p.serveH2(ctx, cTLS, upTLS, a)
		return
	}
	p.relayH1(a, cTLS, upTLS)
}

// relayH1 relays HTTP/1.1 requests on an intercepted connection, one by
// one: each checked (Host, form, request rules), placeholders replaced.
func (p *Proxy) relayH1(a *attempt, cTLS, upTLS *tls.Conn) {
	inner := &client{rwc: cTLS, br: bufio.NewReaderSize(cTLS, maxHeaderBytes), stopTimer: func() {}}
	up := &upstream{conn: upTLS, br: bufio.NewReader(upTLS), a: a, p: p}
	for {
		block, err := peekHeader(inner.br)
		if err != nil {
			if errors.Is(err, errHeaderTooLarge) {
				writeStatus(cTLS, http.StatusRequestHeaderFieldsTooLarge, "request header too large")
			}
			return
		}
		raw := readRaw(block)
		hosts, herr := rawHostHeaders(block)
		req, err := http.ReadRequest(inner.br)
		if err != nil {
			writeStatus(cTLS, http.StatusBadRequest, "malformed request")
			return
		}
		if herr != nil || len(hosts) > 1 || len(hosts) == 1 && !hostAgrees(hosts[0], a.host, a.port, 443) {
			writeStatus(cTLS, http.StatusMisdirectedRequest, "Host header does not match the TLS target")
			return
		}
		if req.URL.Host != "" || req.Method == http.MethodConnect {
			writeStatus(cTLS, http.StatusBadRequest, "origin-form requests only")
			return
		}
		if d := p.checkRequest(a, req, raw, true); d.why != "" {
			refuseRequest(cTLS, req, d)
			return
		}
		hits := replaceHeaders(req.Header, p.secrets, a.host.Name, a.port)
		for _, s := range containsPlaceholder([]byte(req.URL.String()), p.secrets) {
			hits = append(hits, headerHit{secret: s})
		}
		p.noteLeaks(a, hits)
		keep, err := p.forward(inner, req, up, false)
		if err != nil || !keep {
			return
		}
	}
}
