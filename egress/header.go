package egress

import (
	"bufio"
	"bytes"
	"errors"
	"net/textproto"
	"strings"

	"github.com/airlock-dev/airlock/policy"
)

// maxHeaderBytes bounds a request's line and headers (the bufio size).
const maxHeaderBytes = 32 << 10

var errHeaderTooLarge = errors.New("request header too large")

// peekHeader returns the raw request line and headers still in br (not
// consumed), so the proxy can see exactly what the client sent (net/http
// drops the Host header of absolute-URI requests) and bound its size.
func peekHeader(br *bufio.Reader) ([]byte, error) {
	if _, err := br.Peek(1); err != nil {
		return nil, err
	}
	for {
		n := br.Buffered()
		b, _ := br.Peek(n)
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			return b[:i+4], nil
		}
		if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
			return b[:i+2], nil
		}
		if n >= br.Size() {
			return nil, errHeaderTooLarge
		}
		if _, err := br.Peek(n + 1); err != nil {
			return nil, err
		}
	}
}

// rawHostHeaders returns every Host header value in a raw header block.
func rawHostHeaders(block []byte) ([]string, error) {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(block)))
	if _, err := tp.ReadLine(); err != nil {
		return nil, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	return h.Values("Host"), nil
}

// splitHostPort splits an authority "host:port" or "[v6]:port"; without a
// port, def is used (0 means the port is required).
func splitHostPort(s string, def uint16) (string, uint16, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("unterminated '['")
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			if def == 0 {
				return "", 0, errors.New("missing port")
			}
			return host, def, nil
		}
		if rest[0] != ':' {
			return "", 0, errors.New("junk after ']'")
		}
		p, err := port16(rest[1:])
		return host, p, err
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		if def == 0 {
			return "", 0, errors.New("missing port")
		}
		return s, def, nil
	}
	if strings.IndexByte(s, ':') != i {
		return "", 0, errors.New("IPv6 address must be in brackets")
	}
	p, err := port16(s[i+1:])
	if err != nil {
		return "", 0, err
	}
	return s[:i], p, nil
}

// port16 is policy.ParsePort for the proxy's uint16 ports.
func port16(s string) (uint16, error) {
	n, ok := policy.ParsePort(s)
	if !ok {
		return 0, errors.New("bad port")
	}
	return uint16(n), nil
}

// hostAgrees checks a Host header value against the target.
func hostAgrees(hdr string, target policy.Host, port, defPort uint16) bool {
	h, p, err := splitHostPort(hdr, defPort)
	if err != nil {
		return false
	}
	n, err := policy.NormalizeHost(h)
	return err == nil && n == target && p == port
}
