package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
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

func (l *live) publicPorts() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.life.publicPorts
}

func (l *live) autoResumes() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.life.autoResume
}

func (s *Server) handleFreeze(w http.ResponseWriter, r *http.Request, l *live) {
	if err := s.freeze(r.Context(), l, "frozen through the API"); err != nil {
		s.writeError(w, r, err)
		return
	}
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	writeJSON(w, http.StatusOK, s.view(l, rec, false))
}

// freeze freezes l's processes in place (a no-op when frozen already),
// auditing it with message.
func (s *Server) freeze(ctx context.Context, l *live, message string) error {
	fr, ok := l.sb.(sandbox.Freezer)
	if !ok {
		return fmt.Errorf("freeze sandbox %q: the %s backend cannot freeze: %w", l.sb.ID(), l.backend, sandbox.ErrNotSupported)
	}
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return fmt.Errorf("freeze sandbox %q: being destroyed: %w", l.sb.ID(), sandbox.ErrClosed)
	}
	already := l.life.frozen
	l.life.frozen = true // before the freeze: no new request reaches the agent
	l.mu.Unlock()
	if already {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := fr.Freeze(ctx)
	cancel()
	if err != nil {
		l.mu.Lock()
		l.life.frozen = false
		l.mu.Unlock()
		fr.Thaw(context.Background())
		return err
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypePolicy, Message: message})
	return nil
}

// pauseOnTimeout freezes l, whose timeout passed and which was created
// with on_timeout pause, and keeps it alive (the reaper set keepAlive);
// one that cannot be frozen is destroyed as expired.
func (s *Server) pauseOnTimeout(l *live) {
	l.mu.Lock()
	rec := l.rec
	if rec != nil {
		rec.KeepAlive = true
	}
	expires := l.expires
	l.mu.Unlock()
	err := s.freeze(s.ctx, l, "frozen at its timeout (on_timeout pause)")
	if err == nil && rec != nil {
		err = s.store.UpdateLifetime(s.ctx, rec.ID, expires, true)
	}
	if err != nil {
		s.log.Warn("pause at timeout failed: destroying", "sandbox", l.sb.ID(), "err", err)
		s.destroy(l, "expired")
	}
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
	var lifetime func() error
	if l.life.onTimeout == api.OnTimeoutPause && l.keepAlive && l.rec != nil {
		// Paused at its timeout (or by an E2B pause): running again, it
		// gets its lease again.
		l.keepAlive, l.expires = false, time.Now().UTC().Add(l.life.lease)
		l.rec.KeepAlive, l.rec.ExpiresAt = false, l.expires
		id, exp := l.rec.ID, l.expires
		lifetime = func() error { return s.store.UpdateLifetime(ctx, id, exp, false) }
	}
	l.mu.Unlock()
	if lifetime != nil {
		if err := lifetime(); err != nil {
			return err
		}
	}
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

// maxHoldStill bounds how long a read of a sandbox's files keeps it
// frozen: far below what its agent session survives without keep-alives
// (a frozen agent answers none), so a long checkpoint never ends the
// sandbox. Past it the read goes on with the sandbox running: a file
// written meanwhile is recorded as it was read.
const maxHoldStill = 5 * time.Second

// holdStill freezes l (unless it is frozen already) for a read of its
// files and returns what thaws it; without a freezer it does nothing. It
// thaws by itself after maxHoldStill. Requests meanwhile wait for the
// agent rather than fail.
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
	var once sync.Once
	thaw := func() {
		once.Do(func() {
			if l.isFrozen() {
				return // frozen through the API meanwhile: it stays so
			}
			tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := fr.Thaw(tctx); err != nil {
				s.log.Error("thaw after checkpoint", "sandbox", l.sb.ID(), "err", err)
			}
		})
	}
	t := time.AfterFunc(maxHoldStill, func() {
		s.log.Info("checkpoint reads on with the sandbox running", "sandbox", l.sb.ID(), "frozen_for", maxHoldStill)
		thaw()
	})
	return func() {
		t.Stop()
		thaw()
	}
}
