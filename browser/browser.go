package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/logtail"
	"github.com/airlock-dev/airlock/sandbox"
)

// Defaults.
const (
	DefaultBinary = "chromium"
	DefaultPort   = 9222
	DefaultWidth  = 1280
	DefaultHeight = 800
	// MaxSide bounds a viewport side and a screenshot's width or height.
	MaxSide = 4096
	// MaxPNG bounds one screenshot.
	MaxPNG = 32 << 20
	// startTimeout bounds Chromium's start (first answer on its port).
	startTimeout = 60 * time.Second
)

// Options configure a browser started in a sandbox.
type Options struct {
	Binary string // Chromium inside the sandbox, looked up in its PATH; default "chromium"
	Port   int    // DevTools port on the sandbox's loopback; default 9222
	// Width and Height are the viewport (default 1280x800).
	Width, Height int
	// Proxy is the sandbox's egress proxy ("http://127.0.0.1:3128") when
	// it has network; "" means the browser has none (Chromium is told to
	// use no proxy and reaches only the sandbox's loopback).
	Proxy string
	// Env is added to Chromium's environment (the sandbox's own applies).
	Env map[string]string
}

// Flags are Chromium's command line inside a sandbox, and why each:
//
//   - --headless: no display in a sandbox.
//   - --no-sandbox: Chromium's own sandbox needs user namespaces or a
//     set-uid helper; the sandbox forbids both (no capabilities,
//     no-new-privileges, namespace creation refused by seccomp), and is
//     itself the boundary around the whole browser.
//   - --remote-debugging-address=127.0.0.1, --remote-debugging-port: the
//     DevTools endpoint on the sandbox's own loopback, reached from the
//     host only through the agent's dial stream.
//   - --user-data-dir under /tmp: a fresh profile per browser, in the
//     sandbox's own tmpfs, nothing of the host's.
//   - --disable-dev-shm-usage: shared memory from /tmp, so a small
//     /dev/shm cannot crash renderers.
//   - --disable-gpu: no GPU device in a sandbox.
//   - no calls home: --disable-background-networking,
//     --disable-component-update, --disable-sync,
//     --disable-domain-reliability, --disable-client-side-phishing-detection,
//     --disable-breakpad, --metrics-recording-only, --no-first-run,
//     --no-default-browser-check, --disable-default-apps,
//     --disable-extensions, --disable-features=Translate,MediaRouter,OptimizationHints:
//     Chromium's own traffic would go through the egress proxy (and be
//     refused or audited): it has nothing to fetch.
//   - --proxy-server (or --no-proxy-server): the sandbox's egress proxy,
//     the only way out; without one, no proxy lookups at all.
//   - --password-store=basic, --use-mock-keychain, --mute-audio,
//     --hide-scrollbars: no keyring, no sound, clean screenshots.
func Flags(o Options) []string {
	o = o.withDefaults()
	f := []string{
		"--headless", "--no-sandbox",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=" + strconv.Itoa(o.Port),
		"--user-data-dir=/tmp/airlock-browser-" + strconv.Itoa(o.Port),
		"--disable-dev-shm-usage", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-domain-reliability", "--disable-client-side-phishing-detection", "--disable-breakpad",
		"--metrics-recording-only", "--no-first-run", "--no-default-browser-check", "--disable-default-apps",
		"--disable-extensions", "--disable-features=Translate,MediaRouter,OptimizationHints",
		"--password-store=basic", "--use-mock-keychain", "--mute-audio", "--hide-scrollbars",
		"--window-size=" + strconv.Itoa(o.Width) + "," + strconv.Itoa(o.Height),
	}
	if o.Proxy != "" {
		f = append(f, "--proxy-server="+o.Proxy)
	} else {
		f = append(f, "--no-proxy-server")
	}
	return append(f, "about:blank")
}

func (o Options) withDefaults() Options {
	if o.Binary == "" {
		o.Binary = DefaultBinary
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Height == 0 {
		o.Height = DefaultHeight
	}
	return o
}

// Session is one Chromium running in a sandbox, with one page. Its
// methods are safe for concurrent use (they run one at a time).
type Session struct {
	sb   sandbox.Sandbox
	d    sandbox.PortDialer
	opts Options
	proc sandbox.Process
	out  *logtail.Tail
	c    *cdp
	page string // the page's DevTools session ID

	mu sync.Mutex
}

// Start starts Chromium in sb and opens a page. The sandbox must be a
// sandbox.PortDialer (ErrNotSupported otherwise) and have Chromium
// (ErrNotFound otherwise). Close ends it; so does the sandbox's end.
func Start(ctx context.Context, sb sandbox.Sandbox, o Options) (_ *Session, err error) {
	o = o.withDefaults()
	if o.Port < 1 || o.Port > 65535 || o.Width < 1 || o.Height < 1 || o.Width > MaxSide || o.Height > MaxSide {
		return nil, fmt.Errorf("start browser: port %d, viewport %dx%d: %w", o.Port, o.Width, o.Height, sandbox.ErrInvalid)
	}
	d, ok := sb.(sandbox.PortDialer)
	if !ok {
		return nil, fmt.Errorf("start browser: this sandbox cannot be dialled into: %w", sandbox.ErrNotSupported)
	}
	s := &Session{sb: sb, d: d, opts: o, out: &logtail.Tail{Max: 4 << 10}}
	// The browser outlives the request that starts it (not the sandbox).
	s.proc, err = sb.Exec(context.WithoutCancel(ctx), sandbox.ExecRequest{
		Args: append([]string{o.Binary}, Flags(o)...), Env: o.Env, Stdout: s.out, Stderr: s.out,
	})
	if err != nil {
		return nil, fmt.Errorf("start browser: %w", err)
	}
	exited := make(chan struct{})
	go func() { s.proc.Wait(context.Background()); close(exited) }()
	defer func() {
		if err != nil {
			s.proc.Kill(context.Background())
		}
	}()
	wsURL, err := s.waitReady(ctx, exited)
	if err != nil {
		return nil, fmt.Errorf("start browser: %w", err)
	}
	if s.c, err = dialCDP(ctx, wsURL, func(ctx context.Context) (net.Conn, error) { return d.DialPort(ctx, o.Port) }); err != nil {
		return nil, fmt.Errorf("start browser: %w", err)
	}
	if err := s.openPage(ctx); err != nil {
		s.c.close()
		return nil, fmt.Errorf("start browser: %w", err)
	}
	return s, nil
}

// waitReady polls the DevTools port until /json/version answers and
// returns the browser's websocket URL.
func (s *Session) waitReady(ctx context.Context, exited <-chan struct{}) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last error
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 250*time.Millisecond) {
		u, err := s.version(ctx)
		if err == nil {
			return u, nil
		}
		last = err
		select {
		case <-exited:
			return "", fmt.Errorf("chromium exited: %s: %w", strings.TrimSpace(s.out.String()), sandbox.ErrUnavailable)
		case <-ctx.Done():
			return "", fmt.Errorf("chromium did not answer on port %d: %v: %w", s.opts.Port, last, errors.Join(ctx.Err(), sandbox.ErrTimeout))
		case <-time.After(delay):
		}
	}
}

// version asks GET /json/version over one dialled stream.
func (s *Session) version(ctx context.Context) (string, error) {
	c, err := s.d.DialPort(ctx, s.opts.Port)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	fmt.Fprintf(c, "GET /json/version HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", s.opts.Port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&v); err != nil {
		return "", fmt.Errorf("/json/version: %v", err)
	}
	u, err := url.Parse(v.WS)
	if err != nil || u.Scheme != "ws" {
		return "", fmt.Errorf("/json/version: websocket URL %q", v.WS)
	}
	return v.WS, nil
}

// openPage makes the page this session drives, with the viewport set.
func (s *Session) openPage(ctx context.Context) error {
	var t struct {
		TargetID string `json:"targetId"`
	}
	if err := s.c.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &t); err != nil {
		return err
	}
	var a struct {
		SessionID string `json:"sessionId"`
	}
	if err := s.c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &a); err != nil {
		return err
	}
	s.page = a.SessionID
	if err := s.c.call(ctx, s.page, "Page.enable", struct{}{}, nil); err != nil {
		return err
	}
	return s.c.call(ctx, s.page, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": s.opts.Width, "height": s.opts.Height, "deviceScaleFactor": 1, "mobile": false,
	}, nil)
}

// Page is what a navigation ended on.
type Page struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// CheckURL accepts the URLs a browser may be sent to: http, https, file
// (the sandbox's own files), data and about:blank.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > 8192 {
		return fmt.Errorf("url %q: not a URL: %w", clip(raw), sandbox.ErrInvalid)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("url %q: no host: %w", clip(raw), sandbox.ErrInvalid)
		}
	case "file", "data":
	case "about":
		if raw != "about:blank" {
			return fmt.Errorf("url %q: only about:blank: %w", clip(raw), sandbox.ErrInvalid)
		}
	default:
		return fmt.Errorf("url %q: scheme %q not allowed (http, https, file, data, about:blank): %w", clip(raw), u.Scheme, sandbox.ErrInvalid)
	}
	return nil
}

// Navigate opens rawURL in the page and waits for its load event (at most
// until ctx ends). A page that failed to load (DNS, refused, blocked by
// the egress policy) is an ErrUnavailable error with Chromium's reason.
func (s *Session) Navigate(ctx context.Context, rawURL string) (Page, error) {
	if err := CheckURL(rawURL); err != nil {
		return Page{}, fmt.Errorf("navigate: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	loaded := s.c.expect(s.page, "Page.loadEventFired")
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := s.c.call(ctx, s.page, "Page.navigate", map[string]any{"url": rawURL}, &nav); err != nil {
		loaded(canceled())
		return Page{}, fmt.Errorf("navigate: %w", err)
	}
	if nav.ErrorText != "" {
		loaded(canceled())
		return Page{}, fmt.Errorf("navigate %s: %s: %w", clip(rawURL), nav.ErrorText, sandbox.ErrUnavailable)
	}
	if err := loaded(ctx); err != nil {
		return Page{}, fmt.Errorf("navigate %s: %w", clip(rawURL), err)
	}
	return s.page0(ctx)
}

// Page reports the page's URL and title.
func (s *Session) Page(ctx context.Context) (Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.page0(ctx)
}

func (s *Session) page0(ctx context.Context) (Page, error) {
	var ev struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
	}
	if err := s.c.call(ctx, s.page, "Runtime.evaluate", map[string]any{"expression": "JSON.stringify([location.href, document.title])", "returnByValue": true}, &ev); err != nil {
		return Page{}, err
	}
	var pair [2]string
	if err := json.Unmarshal([]byte(ev.Result.Value), &pair); err != nil {
		return Page{}, fmt.Errorf("page title: %v: %w", err, sandbox.ErrUnavailable)
	}
	return Page{URL: pair[0], Title: clip(pair[1])}, nil
}

// Screenshot returns a PNG of the page: the viewport, or the whole page
// when full (bounded by MaxSide and MaxPNG).
func (s *Session) Screenshot(ctx context.Context, full bool) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	params := map[string]any{"format": "png"}
	if full {
		var m struct {
			CSSContentSize struct {
				Width, Height float64
			} `json:"cssContentSize"`
		}
		if err := s.c.call(ctx, s.page, "Page.getLayoutMetrics", struct{}{}, &m); err != nil {
			return nil, fmt.Errorf("screenshot: %w", err)
		}
		w, h := min(m.CSSContentSize.Width, MaxSide), min(m.CSSContentSize.Height, MaxSide)
		params["captureBeyondViewport"] = true
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": max(w, 1), "height": max(h, 1), "scale": 1}
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := s.c.call(ctx, s.page, "Page.captureScreenshot", params, &shot); err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	if base64.StdEncoding.DecodedLen(len(shot.Data)) > MaxPNG {
		return nil, fmt.Errorf("screenshot: larger than %d bytes: %w", MaxPNG, sandbox.ErrLimit)
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		return nil, fmt.Errorf("screenshot: not a PNG: %w", sandbox.ErrUnavailable)
	}
	return png, nil
}

// Done is closed when the browser's DevTools connection ended (Close, or
// Chromium died, or the sandbox ended).
func (s *Session) Done() <-chan struct{} { return s.c.done }

// Close ends the browser (its whole process group). Idempotent.
func (s *Session) Close(ctx context.Context) error {
	s.c.close()
	return s.proc.Kill(ctx)
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
