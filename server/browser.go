package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/browser"
	"github.com/airlock-dev/airlock/sandbox"
)

// browserTimeout bounds one browser request (start, load, screenshot).
const browserTimeout = 90 * time.Second

// browsers holds the browser (package browser) of live sandboxes: at most
// one per sandbox, started on first use and closed with the sandbox. The
// browser is a process inside the sandbox, under its policy; the server
// reaches its DevTools endpoint only through the agent (never a port).
type browsers struct {
	mu sync.Mutex
	m  map[string]*browserSlot
}

// browserSlot serializes the requests of one sandbox's browser; s is nil
// until started and again after it died.
type browserSlot struct {
	sem chan struct{}
	s   *browser.Session
}

func (bs *browsers) slot(l *live) *browserSlot {
	id := l.sb.ID()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.m == nil {
		bs.m = map[string]*browserSlot{}
	}
	sl := bs.m[id]
	if sl == nil {
		sl = &browserSlot{sem: make(chan struct{}, 1)}
		bs.m[id] = sl
		go func() {
			<-l.gone
			bs.mu.Lock()
			delete(bs.m, id)
			bs.mu.Unlock()
			sl.sem <- struct{}{}
			if sl.s != nil {
				sl.s.Close(context.Background())
			}
			<-sl.sem
		}()
	}
	return sl
}

// withBrowser runs fn with l's browser, started (with the viewport asked
// for) when there is none or the last one died. On error it has answered.
func (s *Server) withBrowser(w http.ResponseWriter, r *http.Request, l *live, width, height int, fn func(ctx context.Context, b *browser.Session) error) {
	ctx, cancel := context.WithTimeout(r.Context(), browserTimeout)
	defer cancel()
	sl := s.browsers.slot(l)
	select {
	case sl.sem <- struct{}{}:
		defer func() { <-sl.sem }()
	case <-ctx.Done():
		s.writeError(w, r, ctx.Err())
		return
	case <-l.gone:
		s.writeError(w, r, fmt.Errorf("browser in %q: %w", l.sb.ID(), sandbox.ErrClosed))
		return
	}
	if sl.s != nil {
		select {
		case <-sl.s.Done():
			sl.s.Close(context.Background())
			sl.s = nil
		default:
		}
	}
	if sl.s == nil {
		sreq, err := s.execRequest(l, &api.ExecRequest{Args: []string{browser.DefaultBinary}})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		o := browser.Options{Width: width, Height: height, Env: sreq.Env}
		if !l.netless {
			o.Proxy = sreq.Env["HTTP_PROXY"]
		}
		b, err := browser.Start(ctx, l.sb, o)
		if err != nil {
			s.writeError(w, r, fmt.Errorf("browser in %q: %w", l.sb.ID(), err))
			return
		}
		sl.s = b
	}
	if err := fn(ctx, sl.s); err != nil {
		s.writeError(w, r, fmt.Errorf("browser in %q: %w", l.sb.ID(), err))
	}
}

func checkViewport(width, height int) error {
	if width < 0 || height < 0 || width > browser.MaxSide || height > browser.MaxSide {
		return errBadRequest("viewport %dx%d: each side 1..%d", width, height, browser.MaxSide)
	}
	return nil
}

func (s *Server) handleBrowserNavigate(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.BrowserNavigateRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if err := browser.CheckURL(req.URL); err != nil {
		s.writeError(w, r, fmt.Errorf("browser: %w", err))
		return
	}
	if err := checkViewport(req.Width, req.Height); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeExec, Message: "browser navigate through the API",
		Fields: map[string]any{"url": req.URL, "tenant": c.tenant}})
	s.withBrowser(w, r, l, req.Width, req.Height, func(ctx context.Context, b *browser.Session) error {
		p, err := b.Navigate(ctx, req.URL)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, api.BrowserPage{URL: p.URL, Title: p.Title})
		return nil
	})
}

func (s *Server) handleBrowserScreenshot(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.BrowserScreenshotRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.URL != "" {
		if err := browser.CheckURL(req.URL); err != nil {
			s.writeError(w, r, fmt.Errorf("browser: %w", err))
			return
		}
	}
	if err := checkViewport(req.Width, req.Height); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeExec, Message: "browser screenshot through the API",
		Fields: map[string]any{"url": req.URL, "tenant": c.tenant}})
	s.withBrowser(w, r, l, req.Width, req.Height, func(ctx context.Context, b *browser.Session) error {
		if req.URL != "" {
			if _, err := b.Navigate(ctx, req.URL); err != nil {
				return err
			}
		}
		png, err := b.Screenshot(ctx, req.FullPage)
		if err != nil {
			return err
		}
		p, err := b.Page(ctx)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, api.BrowserScreenshot{BrowserPage: api.BrowserPage{URL: p.URL, Title: p.Title}, Format: "png", Data: png})
		return nil
	})
}
