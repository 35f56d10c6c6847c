// Package client is the Go SDK of Airlock's /v1 HTTP API (`airlock serve`):
// create sandboxes, run commands in them (buffered, streamed, in the
// background, on a PTY), move files and read audit events. Every call takes
// a context first. Errors from the server unwrap to the errdefs kinds
// their code names, so errors.Is(err, errdefs.ErrNotFound) works across the
// wire. It builds on api and errdefs only (no policy or backend code), on
// every OS.
//
// It must never hold server-side state beyond a connection pool, and never
// send an API key anywhere but the configured host.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
)

// Environment variables read by FromEnv.
const (
	EnvHost   = "AIRLOCK_HOST"    // unix:///path/airlock.sock, /path/airlock.sock or http://host:port
	EnvAPIKey = "AIRLOCK_API_KEY" // Bearer key (required over TCP)
)

// DefaultSocket is where `airlock serve` listens by default: under
// /run/airlock as root, else under $XDG_RUNTIME_DIR (or the temp dir).
func DefaultSocket() string {
	if os.Geteuid() == 0 {
		return "/run/airlock/airlock.sock"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "airlock", "airlock.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", os.Geteuid()), "airlock.sock")
}

// Client talks to one server. Safe for concurrent use.
type Client struct {
	base  string // http://host:port or http://airlock (unix)
	where string // the server as the caller named it, for messages
	key   string
	hc    *http.Client
}

// Option configures New.
type Option func(*Client)

// WithAPIKey sends key as a Bearer token.
func WithAPIKey(key string) Option { return func(c *Client) { c.key = key } }

// WithHTTPClient replaces the HTTP client (its transport decides the dialing).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of host: "unix:///path.sock", "/path.sock",
// "http://host:port" or "https://host:port". Empty means DefaultSocket.
func New(host string, opts ...Option) (*Client, error) {
	if host == "" {
		host = DefaultSocket()
	}
	c := &Client{}
	sock := ""
	switch {
	case strings.HasPrefix(host, "unix://"):
		sock = strings.TrimPrefix(host, "unix://")
	case strings.HasPrefix(host, "/"):
		sock = host
	case strings.HasPrefix(host, "http://"), strings.HasPrefix(host, "https://"):
		u, err := url.Parse(host)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("airlock client: host %q: %w", host, errdefs.ErrInvalid)
		}
		c.base = strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/")
		c.where = c.base
		c.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	default:
		return nil, fmt.Errorf("airlock client: host %q: want unix:///path, /path or http(s)://host:port: %w", host, errdefs.ErrInvalid)
	}
	if sock != "" {
		c.base, c.where = "http://airlock", "unix://"+sock
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
			MaxIdleConns:        100,
			MaxIdleConnsPerHost: 100,
			IdleConnTimeout:     90 * time.Second,
		}
		c.hc = &http.Client{Transport: tr}
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// FromEnv returns a client of $AIRLOCK_HOST (default: the local socket)
// with $AIRLOCK_API_KEY.
func FromEnv() (*Client, error) {
	return New(os.Getenv(EnvHost), WithAPIKey(os.Getenv(EnvAPIKey)))
}

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Error is an error answer of the server. It unwraps to the error kind
// its Code stands for (api's code table), so errors.Is(err,
// errdefs.ErrNotFound) works across the wire; the HTTP status is kept for
// display only.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("airlock: %s (%d %s)", e.Message, e.Status, e.Code)
}

// Unwrap maps the code back to an error kind (nil for an unknown code).
func (e *Error) Unwrap() error { return api.KindOf(e.Code) }

// errorOf turns an error object of the API (an answer's body, a stream
// frame, a PTY message) into an *Error.
func errorOf(status int, info api.ErrorInfo) *Error {
	if status == 0 {
		status = api.StatusOf(info.Code)
	}
	return &Error{Status: status, Code: info.Code, Message: info.Message}
}

func decodeError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code == "" {
		return &Error{Status: resp.StatusCode, Code: "http", Message: strings.TrimSpace(string(body))}
	}
	return errorOf(resp.StatusCode, eb.Error)
}

// dialError explains a failure to connect at all (no socket, nobody
// listening): the usual cause is a server that is not running. Nil for
// other errors.
func (c *Client) dialError(err error) error {
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		return nil
	}
	return fmt.Errorf("airlock: no server answers at %s: is `airlock serve` running (or is %s or --host pointing elsewhere)? (%v): %w",
		c.where, EnvHost, oe, errdefs.ErrUnavailable)
}

// request builds a request to path (already escaped) with query q.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Request, error) {
	if strings.Contains(path, "//") || strings.HasSuffix(path, "/") {
		return nil, fmt.Errorf("airlock: %s %s: empty sandbox or process ID: %w", method, path, errdefs.ErrInvalid)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	return req, nil
}

// do sends req and returns the response when its status is want (any 2xx
// if want is 0); other statuses become *Error.
func (c *Client) do(req *http.Request, want int) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		if derr := c.dialError(err); derr != nil {
			return nil, derr
		}
		return nil, fmt.Errorf("airlock: %s %s: %w", req.Method, req.URL.Path, err)
	}
	ok := resp.StatusCode == want || (want == 0 && resp.StatusCode/100 == 2)
	if !ok {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// call sends in as JSON (nil: no body) and decodes the answer into out (nil: discard).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.do(req, 0)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("airlock: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// stream sends body (nil: none) of contentType ("": unset) and returns the
// body of a 200 answer; the caller closes it.
func (c *Client) stream(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (io.ReadCloser, error) {
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// send is stream for a request whose answer carries nothing of interest.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) error {
	rc, err := c.stream(ctx, method, path, q, body, contentType)
	if err != nil {
		return err
	}
	rc.Close()
	return nil
}

func sbPath(id string, rest ...string) string {
	return "/v1/sandboxes/" + url.PathEscape(id) + strings.Join(rest, "")
}

// Health returns the server's health and backend probes.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	var h api.Health
	if err := c.call(ctx, "GET", "/healthz", nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Create creates a sandbox.
func (c *Client) Create(ctx context.Context, req api.CreateSandboxRequest) (*api.Sandbox, error) {
	var sb api.Sandbox
	if err := c.call(ctx, "POST", "/v1/sandboxes", nil, req, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// ListOptions filters List.
type ListOptions struct {
	Labels map[string]string // all must match
	All    bool              // include stopped sandboxes
	State  string            // only this state: running, paused or stopped
}

// List lists the caller's sandboxes.
func (c *Client) List(ctx context.Context, o ListOptions) ([]api.Sandbox, error) {
	q := url.Values{}
	for k, v := range o.Labels {
		q.Add("label", k+"="+v)
	}
	if o.All {
		q.Set("all", "true")
	}
	if o.State != "" {
		q.Set("state", o.State)
	}
	var l api.SandboxList
	if err := c.call(ctx, "GET", "/v1/sandboxes", q, nil, &l); err != nil {
		return nil, err
	}
	return l.Sandboxes, nil
}

// Get describes sandbox id.
func (c *Client) Get(ctx context.Context, id string) (*api.Sandbox, error) {
	var sb api.Sandbox
	if err := c.call(ctx, "GET", sbPath(id), nil, nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// Delete destroys sandbox id. Deleting a stopped sandbox is not an error.
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.call(ctx, "DELETE", sbPath(id), nil, nil, nil)
}

// SetTimeout makes sandbox id expire d from now.
func (c *Client) SetTimeout(ctx context.Context, id string, d time.Duration) (*api.Sandbox, error) {
	t := api.Duration(d)
	var sb api.Sandbox
	err := c.call(ctx, "PATCH", sbPath(id), nil, api.PatchSandboxRequest{Timeout: &t}, &sb)
	return &sb, err
}

// SetKeepAlive turns expiry off (true) or back on.
func (c *Client) SetKeepAlive(ctx context.Context, id string, keep bool) (*api.Sandbox, error) {
	var sb api.Sandbox
	err := c.call(ctx, "PATCH", sbPath(id), nil, api.PatchSandboxRequest{KeepAlive: &keep}, &sb)
	return &sb, err
}

// SetNetwork replaces the network rules of running sandbox id.
func (c *Client) SetNetwork(ctx context.Context, id string, n api.NetworkRequest) error {
	return c.call(ctx, "PUT", sbPath(id, "/network"), nil, n, nil)
}

// Events returns the audit events of sandbox id after sequence number after.
func (c *Client) Events(ctx context.Context, id string, after int64) ([]api.Event, error) {
	var l api.EventList
	err := c.call(ctx, "GET", sbPath(id, "/events"), url.Values{"after": {fmt.Sprint(after)}}, nil, &l)
	return l.Events, err
}

// FollowEvents calls fn for each event after after, as they happen, until
// the sandbox ends, ctx ends or fn returns an error.
func (c *Client) FollowEvents(ctx context.Context, id string, after int64, fn func(api.Event) error) error {
	req, err := c.request(ctx, "GET", sbPath(id, "/events"), url.Values{"after": {fmt.Sprint(after)}, "follow": {"true"}}, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var e api.Event
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

func decodeJSONBody(r io.Reader, out any) error {
	if err := json.NewDecoder(r).Decode(out); err != nil {
		return fmt.Errorf("airlock: decode answer: %w", err)
	}
	return nil
}
