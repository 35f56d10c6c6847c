package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// A frozen sandbox keeps its processes and memory, stopped by the cgroup
// freezer, while this server lives: requests to it are refused (409) but
// delete, resume and (with auto_resume) any request, which thaws it. It
// still expires and counts against its quotas; a shutdown or crash ends
// it like a running one.

func errFrozen(id string) error {
	return &httpError{api.CodeConflict, fmt.Errorf("sandbox %q: frozen (POST /v1/sandboxes/%s/resume): %w", id, id, sandbox.ErrClosed)}
}

func (l *live) isFrozen() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.life.frozen
}

func (l *live) autoResumes() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.life.autoResume
}

func (s *Server) handleFreeze(w http.ResponseWriter, r *http.Request, l *live) {
	fr, ok := l.sb.(sandbox.Freezer)
	if !ok {
		s.writeError(w, r, fmt.Errorf("freeze sandbox %q: the %s backend cannot freeze: %w", l.sb.ID(), l.backend, sandbox.ErrNotSupported))
		return
	}
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		s.writeError(w, r, fmt.Errorf("freeze sandbox %q: being destroyed: %w", l.sb.ID(), sandbox.ErrClosed))
		return
	}
	already := l.life.frozen
	l.life.frozen = true // before the freeze: no new request reaches the agent
	l.mu.Unlock()
	if !already {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		err := fr.Freeze(ctx)
		cancel()
		if err != nil {
			l.mu.Lock()
			l.life.frozen = false
			l.mu.Unlock()
			fr.Thaw(context.Background())
			s.writeError(w, r, err)
			return
		}
		s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypePolicy, Message: "frozen through the API"})
	}
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	writeJSON(w, http.StatusOK, s.view(l, rec, false))
}

// thaw lets a frozen sandbox run again.
func (s *Server) thaw(ctx context.Context, l *live) error {
	fr, ok := l.sb.(sandbox.Freezer)
	if !ok {
		return nil
	}
	if err := fr.Thaw(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	l.life.frozen = false
	l.mu.Unlock()
	l.touch()
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypePolicy, Message: "thawed"})
	return nil
}

// thawForEnd thaws a frozen sandbox about to end, so that its processes
// can be told to stop (best effort: Destroy kills frozen ones too).
func (s *Server) thawForEnd(l *live) {
	if !l.isFrozen() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if fr, ok := l.sb.(sandbox.Freezer); ok {
		fr.Thaw(ctx)
	}
}

// holdStill freezes l (unless it is frozen already) for a read of its
// files and returns what thaws it; without a freezer it does nothing.
// Requests meanwhile wait for the agent rather than fail.
func (s *Server) holdStill(ctx context.Context, l *live) func() {
	fr, ok := l.sb.(sandbox.Freezer)
	if !ok || l.isFrozen() {
		return func() {}
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := fr.Freeze(fctx); err != nil {
		fr.Thaw(context.Background())
		s.log.Debug("checkpoint without freezing", "sandbox", l.sb.ID(), "err", err)
		return func() {}
	}
	return func() {
		if l.isFrozen() {
			return // frozen through the API meanwhile: it stays so
		}
		tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := fr.Thaw(tctx); err != nil {
			s.log.Error("thaw after checkpoint", "sandbox", l.sb.ID(), "err", err)
		}
	}
}
