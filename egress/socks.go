package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/airlock-dev/airlock/policy"
)

// SOCKS5 (RFC 1928) constants.
const (
	socksVersion      = 0x05
	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff
	socksCmdConnect   = 0x01
	socksAtypIPv4     = 0x01
	socksAtypDomain   = 0x03
	socksAtypIPv6     = 0x04

	socksOK              = 0x00
	socksFailure         = 0x01
	socksNotAllowed      = 0x02
	socksHostUnreachable = 0x04
	socksRefused         = 0x05
	socksCmdUnsupported  = 0x07
	socksAtypUnsupported = 0x08
)

// socksRequest is a parsed SOCKS5 CONNECT.
type socksRequest struct {
	raw  string // the address as sent (domain bytes, or the IP)
	host policy.Host
	port uint16
}

// socksError carries the reply code for a refused request.
type socksError struct {
	code byte
	msg  string
}

func (e *socksError) Error() string { return e.msg }

// readSOCKS reads the greeting (answering it on w) and the request. Only
// "no authentication" and CONNECT are supported; every address type is.
func readSOCKS(r io.Reader, w io.Writer) (*socksRequest, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	if hdr[0] != socksVersion || hdr[1] == 0 {
		return nil, &socksError{socksFailure, "bad SOCKS greeting"}
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return nil, err
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == socksNoAuth
	}
	if !noAuth {
		w.Write([]byte{socksVersion, socksNoAcceptable})
		return nil, errors.New("SOCKS client offers no acceptable method")
	}
	if _, err := w.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return nil, err
	}
	var req [4]byte
	if _, err := io.ReadFull(r, req[:]); err != nil {
		return nil, err
	}
	if req[0] != socksVersion || req[2] != 0 {
		return nil, &socksError{socksFailure, "bad SOCKS request header"}
	}
	if req[1] != socksCmdConnect {
		return nil, &socksError{socksCmdUnsupported, fmt.Sprintf("SOCKS command %d not supported (CONNECT only)", req[1])}
	}
	sr := &socksRequest{}
	switch req[3] {
	case socksAtypIPv4:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		sr.host = policy.Host{Addr: netip.AddrFrom4(b)}
		sr.raw = sr.host.Addr.String()
	case socksAtypIPv6:
		var b [16]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		a := netip.AddrFrom16(b)
		sr.raw = a.String()
		sr.host = policy.Host{Addr: a.Unmap()}
	case socksAtypDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(r, name); err != nil {
			return nil, err
		}
		sr.raw = string(name)
	default:
		return nil, &socksError{socksAtypUnsupported, fmt.Sprintf("SOCKS address type %d", req[3])}
	}
	var pb [2]byte
	if _, err := io.ReadFull(r, pb[:]); err != nil {
		return nil, err
	}
	sr.port = uint16(pb[0])<<8 | uint16(pb[1])
	if sr.port == 0 {
		return sr, &socksError{socksNotAllowed, "port 0"}
	}
	if req[3] == socksAtypDomain {
		h, err := policy.NormalizeHost(sr.raw)
		if err != nil {
			return sr, &socksError{socksNotAllowed, "bad host: " + err.Error()}
		}
		sr.host = h
	}
	return sr, nil
}

func socksReply(w io.Writer, code byte) error {
	_, err := w.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// serveSOCKS serves one SOCKS5 connection.
func (p *Proxy) serveSOCKS(ctx context.Context, c *client) {
	a := &attempt{proto: "socks5", start: time.Now(), peer: c.peer}
	sr, err := readSOCKS(c.br, c.rwc)
	if sr != nil {
		a.rawHost = quoteHost(sr.raw)
		a.port = sr.port
		a.host = sr.host
	}
	if err != nil {
		var se *socksError
		if errors.As(err, &se) {
			socksReply(c.rwc, se.code)
			a.reason = se.msg
			p.deny(a)
		} else if sr != nil || !errors.Is(err, io.EOF) {
			a.reason = "SOCKS: " + err.Error()
			p.deny(a)
		}
		return
	}
	up, err := p.open(ctx, a)
	if err != nil {
		code := byte(socksNotAllowed)
		switch {
		case errors.Is(err, errResolve):
			code = socksHostUnreachable
		case errors.Is(err, errDial):
			code = socksRefused
		}
		socksReply(c.rwc, code)
		p.deny(a)
		return
	}
	if err := socksReply(c.rwc, socksOK); err != nil {
		up.Close()
		a.reason = "client went away"
		p.deny(a)
		return
	}
	p.tunnel(ctx, c, a, up)
}
