package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
)

// URL is the path-routed URL of port inside sandbox id: requests to it
// (and below it) reach 127.0.0.1:port in the sandbox, HTTP and WebSocket,
// with this client's API key. For a browser, which has no key, use
// PortToken's URL. On a unix-socket client the URL's host is a
// placeholder: only this client's HTTPClient reaches it.
func (c *Client) URL(id string, port int) string {
	return c.base + sbPath(id, "/ports/", strconv.Itoa(port), "/")
}

// HTTPClient is the HTTP client this Client sends with (the one that
// reaches a unix socket); requests to URL through it still need the API
// key header.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// PortToken mints a token that lets whoever holds it reach port of
// sandbox id for ttl (0: the server's default, 15m) without an API key;
// its URL (and PreviewURL, with a preview domain) carry it, absolute.
func (c *Client) PortToken(ctx context.Context, id string, port int, ttl time.Duration) (*api.PortToken, error) {
	var t api.PortToken
	err := c.call(ctx, "POST", sbPath(id, "/port-tokens"), nil, api.PortTokenRequest{Port: port, TTL: api.Duration(ttl)}, &t)
	if err != nil {
		return nil, err
	}
	t.URL = c.base + t.URL
	return &t, nil
}

// DialPort opens a raw TCP byte stream to port on the sandbox's own
// loopback (a WebSocket to the server carries it). ctx bounds the dial
// only; Close ends the stream.
func (c *Client) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if id == "" {
		return nil, fmt.Errorf("airlock: dial port: empty sandbox ID: %w", errdefs.ErrInvalid)
	}
	h := http.Header{}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	u := strings.Replace(c.base, "http", "ws", 1) + sbPath(id, "/tcp/", strconv.Itoa(port))
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode/100 != 1 && resp.StatusCode != 0 {
			return nil, decodeError(resp)
		}
		if derr := c.dialError(err); derr != nil {
			return nil, derr
		}
		return nil, fmt.Errorf("airlock: dial port %d of %q: %w", port, id, err)
	}
	conn.SetReadLimit(1 << 20)
	nctx, cancel := context.WithCancel(context.Background())
	return &portConn{Conn: websocket.NetConn(nctx, conn, websocket.MessageBinary), cancel: cancel}, nil
}

type portConn struct {
	net.Conn
	cancel context.CancelFunc
}

func (p *portConn) Close() error {
	err := p.Conn.Close()
	p.cancel()
	return err
}
