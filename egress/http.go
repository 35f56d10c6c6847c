package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/policy"
)

// serveHTTP serves an HTTP proxy connection: CONNECT becomes a tunnel,
// absolute-URI requests are forwarded one by one, each checked on its own.
func (p *Proxy) serveHTTP(ctx context.Context, c *client) {
	var up *upstream
	defer func() {
		if up != nil {
			up.close()
		}
	}()
	for {
		block, err := peekHeader(c.br)
		if err != nil {
			if errors.Is(err, errHeaderTooLarge) {
				p.deny(&attempt{proto: "http", reason: "request header too large"})
				writeStatus(c.rwc, http.StatusRequestHeaderFieldsTooLarge, "request header too large")
			}
			return
		}
		raw := readRaw(block)
		hosts, herr := rawHostHeaders(block)
		req, err := http.ReadRequest(c.br)
		if err != nil {
			p.deny(&attempt{proto: "http", reason: "malformed request: " + err.Error()})
			writeStatus(c.rwc, http.StatusBadRequest, "malformed request")
			return
		}
		c.stopTimer()
		if herr != nil || len(hosts) > 1 {
			p.deny(&attempt{proto: "http", rawHost: quoteHost(req.RequestURI), reason: "bad or repeated Host header"})
			writeStatus(c.rwc, http.StatusBadRequest, "bad Host header")
			return
		}
		if req.Method == http.MethodConnect {
			if up != nil {
				up.close()
				up = nil
			}
			p.serveConnect(ctx, c, req, hosts)
			return
		}
		var keep bool
		up, keep = p.servePlain(ctx, c, req, raw, hosts, up)
		if !keep {
			return
		}
	}
}

// serveConnect handles "CONNECT host:port".
func (p *Proxy) serveConnect(ctx context.Context, c *client, req *http.Request, hosts []string) {
	a := &attempt{proto: "connect", rawHost: quoteHost(req.RequestURI), start: time.Now(), peer: c.peer}
	refuse := func(code int, why string) {
		if a.reason == "" {
			a.reason = why
		}
		p.deny(a)
		writeStatus(c.rwc, code, a.reason)
	}
	hs, port, err := splitHostPort(req.RequestURI, 0)
	if err != nil {
		refuse(http.StatusBadRequest, "bad CONNECT authority: "+err.Error())
		return
	}
	a.port = port
	a.rawHost = quoteHost(hs)
	h, err := policy.NormalizeHost(hs)
	if err != nil {
		refuse(http.StatusForbidden, "bad host: "+err.Error())
		return
	}
	a.host = h
	if len(hosts) == 1 && !hostAgrees(hosts[0], h, port, port) {
		refuse(http.StatusForbidden, "Host header "+quoteHost(hosts[0])+" differs from CONNECT target")
		return
	}
	if req.ContentLength > 0 || len(req.TransferEncoding) > 0 {
		refuse(http.StatusBadRequest, "CONNECT with a body")
		return
	}
	up, err := p.open(ctx, a)
	if err != nil {
		code := http.StatusForbidden
		if !errors.Is(err, errDenied) {
			code = http.StatusBadGateway
		}
		p.deny(a) // a.reason is the proxy's; the body adds the destination and the way to allow it
		writeStatus(c.rwc, code, deniedBody(a, err))
		return
	}
	if _, err := io.WriteString(c.rwc, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		up.Close()
		a.reason = "client went away"
		p.deny(a)
		return
	}
	p.tunnel(ctx, c, a, up)
}

// upstream is a plain-HTTP origin connection reused across requests to the
// same host and port.
type upstream struct {
	key  string
	conn net.Conn
	br   *bufio.Reader
	a    *attempt
	p    *Proxy
}

func (u *upstream) close() {
	u.conn.Close()
	u.p.finish(u.a)
}

// servePlain forwards one absolute-URI request. It returns the upstream to
// keep for the next request and whether the client connection goes on.
func (p *Proxy) servePlain(ctx context.Context, c *client, req *http.Request, raw rawRequest, hosts []string, up *upstream) (*upstream, bool) {
	a := &attempt{proto: "http", rawHost: quoteHost(req.URL.Host), start: time.Now(), peer: c.peer}
	refuse := func(code int, why string) (*upstream, bool) {
		a.reason = why
		p.deny(a)
		writeStatus(c.rwc, code, why)
		return up, false
	}
	if req.URL.Scheme != "http" || req.URL.Host == "" || req.URL.Opaque != "" {
		if req.URL.Scheme == "https" {
			return refuse(http.StatusBadRequest, "https:// URLs go through CONNECT")
		}
		return refuse(http.StatusBadRequest, "a proxy request needs an absolute http:// URI")
	}
	if req.URL.User != nil {
		return refuse(http.StatusBadRequest, "user info in URI")
	}
	hs, port, err := splitHostPort(req.URL.Host, 80)
	if err != nil {
		return refuse(http.StatusBadRequest, "bad URI host: "+err.Error())
	}
	a.port = port
	a.rawHost = quoteHost(hs)
	h, err := policy.NormalizeHost(hs)
	if err != nil {
		return refuse(http.StatusForbidden, "bad host: "+err.Error())
	}
	a.host = h
	if len(hosts) == 1 && !hostAgrees(hosts[0], h, port, 80) {
		return refuse(http.StatusForbidden, "Host header "+quoteHost(hosts[0])+" differs from URI host")
	}
	if d := p.checkRequest(a, req, raw, false); d.why != "" {
		a.reason = d.why
		refuseRequest(c.rwc, req, d)
		return up, false
	}
	// Plain HTTP never carries a real secret: it would cross the network in
	// clear text. Placeholders are left as they are and reported.
	leaks := replaceHeaders(req.Header, p.secrets, "", port)
	for _, s := range containsPlaceholder([]byte(req.URL.String()), p.secrets) {
		leaks = append(leaks, headerHit{secret: s})
	}
	key := h.String() + "|" + fmt.Sprint(port)
	if up != nil && (up.key != key || p.policy().checkTarget(h, port) != "") {
		up.close()
		up = nil
	}
	if up == nil {
		conn, err := p.open(ctx, a)
		if err != nil {
			code := http.StatusForbidden
			if !errors.Is(err, errDenied) {
				code = http.StatusBadGateway
			}
			p.deny(a) // a.reason is the proxy's; the body adds the destination and the way to allow it
			writeStatus(c.rwc, code, deniedBody(a, err))
			return up, false
		}
		up = &upstream{key: key, conn: conn, br: bufio.NewReader(conn), a: a, p: p}
		if !p.track(a, func() { conn.Close(); c.rwc.Close() }) {
			up.close()
			return nil, false
		}
	}
	p.noteLeaks(up.a, leaks)
	keep, err := p.forward(c, req, up, true)
	if err != nil {
		up.close()
		return nil, false
	}
	return up, keep
}

// noteLeaks records placeholders that were not replaced and injections.
func (p *Proxy) noteLeaks(a *attempt, hits []headerHit) {
	for _, hit := range hits {
		if hit.replaced {
			p.injected.Add(1)
			a.secrets = appendOnce(a.secrets, hit.secret.name)
			continue
		}
		p.leaks.Add(1)
		a.leaked = appendOnce(a.leaked, hit.secret.name)
		p.log.Warn("secret placeholder sent to a host it may not reach; not replaced",
			"secret", hit.secret.name, "host", a.host.String(), "proto", a.proto)
	}
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// hopHeaders are connection-scoped and never forwarded.
var hopHeaders = []string{"Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Keep-Alive", "Te", "Trailer"}

// forward writes req to up and relays the response to the client. With
// plain set, the request came as an absolute URI. It returns whether the
// client connection may carry another request.
func (p *Proxy) forward(c *client, req *http.Request, up *upstream, plain bool) (bool, error) {
	for _, f := range req.Header.Values("Connection") {
		for _, tok := range strings.Split(f, ",") {
			if tok = strings.TrimSpace(tok); tok != "" && !strings.EqualFold(tok, "upgrade") {
				req.Header.Del(tok)
			}
		}
	}
	for _, hh := range hopHeaders {
		req.Header.Del(hh)
	}
	upgrade := req.Header.Get("Upgrade") != ""
	if !upgrade {
		req.Header.Del("Connection")
	}
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		// The proxy answers 100 itself so the client sends its body, which
		// is then streamed upstream with the request.
		req.Header.Del("Expect")
		if _, err := io.WriteString(c.rwc, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false, err
		}
	}
	// The origin sees the canonical form of the host that was checked.
	req.RequestURI = ""
	req.Host = canonicalAuthority(up.a.host, up.a.port, plain)
	up.a.requests.Add(1)
	if err := req.Write(up.conn); err != nil {
		return false, err
	}
	for {
		resp, err := http.ReadResponse(up.br, req)
		if err != nil {
			writeStatus(c.rwc, http.StatusBadGateway, "bad response from upstream")
			return false, err
		}
		scrubHeaders(resp.Header, p.secrets)
		if resp.StatusCode == http.StatusSwitchingProtocols && upgrade {
			if err := resp.Write(c.rwc); err != nil {
				return false, err
			}
			splice(c, up.conn, up.br)
			return false, nil
		}
		if err := resp.Write(c.rwc); err != nil {
			resp.Body.Close()
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			continue
		}
		return !req.Close && !resp.Close, nil
	}
}

// canonicalAuthority is host[:port] for a Host header, the port omitted
// when it is the scheme's default.
func canonicalAuthority(h policy.Host, port uint16, plain bool) string {
	hs := h.String()
	if h.IsIP() && h.Addr.Is6() {
		hs = "[" + hs + "]"
	}
	if plain && port == 80 || !plain && port == 443 {
		return hs
	}
	return hs + ":" + fmt.Sprint(port)
}

// writeStatus writes a minimal closing response.
// deniedBody is what a refused client reads (a tool shows the body of a
// 403): the destination, the reason and, when an allow entry would let it
// through, which one, as `airlock run` says at exit.
func deniedBody(a *attempt, err error) string {
	dest := net.JoinHostPort(a.host.String(), strconv.Itoa(int(a.port)))
	why := "refused " + dest + ": " + a.reason
	if errors.Is(err, errDenied) && strings.Contains(a.reason, "allow") {
		why += "; to allow: an allow entry " + dest + " (airlock run --allow " + dest + ", network.allow)"
	}
	return why
}

func writeStatus(w io.Writer, code int, why string) {
	why = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, why)
	body := "airlock egress: " + why + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Airlock-Egress: denied\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}
