package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
)

// A sandbox being rolled back, paused or resumed is between two lives for
// a moment: its processes are gone or not back yet, and its record may
// say paused. A request that arrives then waits for the change to end and
// goes on with what it left (running again, paused, gone) instead of
// seeing the gap as a 410, a 404 or a "paused" that is not; one that was
// running on the old life when its processes ended is answered 409,
// naming the change. Nothing waits longer than maxChangeWait: then 503.

// maxChangeWait bounds how long a request waits for a sandbox's change.
const maxChangeWait = time.Minute

// changes are the sandboxes being changed, by ID.
type changes struct {
	mu sync.Mutex
	m  map[string]*change
}

// changeRollback is a rollback's what: the one change a sandbox is not
// paused by to its tenant (lists show it running, follows go on).
const changeRollback = "rolled back"

type change struct {
	what string
	n    int // begun and not ended (a rollback's pause and resume nest)
	done chan struct{}
}

// begin marks sandbox id as changing (what: "rolled back", "paused") and
// returns the end to defer. Begins of one sandbox nest.
func (c *changes) begin(id, what string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*change{}
	}
	ch := c.m[id]
	if ch == nil {
		ch = &change{what: what, done: make(chan struct{})}
		c.m[id] = ch
	}
	ch.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if ch.n--; ch.n == 0 {
				delete(c.m, id)
				close(ch.done)
			}
		})
	}
}

// wait returns once sandbox id is not changing: at once when it is not.
// A change that outlasts maxChangeWait answers 503; ctx's end, its error.
func (c *changes) wait(ctx context.Context, id string) error {
	c.mu.Lock()
	ch := c.m[id]
	c.mu.Unlock()
	if ch == nil {
		return nil
	}
	t := time.NewTimer(maxChangeWait)
	defer t.Stop()
	for ch != nil {
		select {
		case <-ch.done:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("sandbox %q is being %s for longer than %s; try again: %w", id, ch.what, maxChangeWait, sandbox.ErrUnavailable)
		}
		c.mu.Lock()
		ch = c.m[id] // a change that began meanwhile
		c.mu.Unlock()
	}
	return nil
}

// what says how sandbox id is changing ("rolled back", "paused",
// "resumed"), "" when it is not.
func (c *changes) what(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.m[id]; ch != nil {
		return ch.what
	}
	return ""
}

// active reports whether sandbox id is changing.
func (c *changes) active(id string) bool { return c.what(id) != "" }

// rollingBack returns the sandboxes being rolled back: from the
// rollback's pause to its resume their records say paused, but to their
// tenants they run (a rollback is no pause).
func (c *changes) rollingBack() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids map[string]bool
	for id, ch := range c.m {
		if ch.what == changeRollback {
			if ids == nil {
				ids = map[string]bool{}
			}
			ids[id] = true
		}
	}
	return ids
}

// listAsSeen lists sandboxes by f as their tenant sees them: one being
// rolled back is running, not paused (its record's state meanwhile).
// The rollbacks are taken before and after the store's answer, so that
// one that ends or begins while it is read is seen either way.
func (s *Server) listAsSeen(ctx context.Context, f store.ListFilter) ([]*store.Record, error) {
	rolling := s.changes.rollingBack()
	recs, err := s.store.ListSandboxes(ctx, f)
	if err != nil {
		return nil, err
	}
	for id := range s.changes.rollingBack() {
		if rolling == nil {
			rolling = map[string]bool{}
		}
		rolling[id] = true
	}
	if len(rolling) == 0 || (f.State != "" && f.State != store.StateRunning && f.State != store.StatePaused) {
		return recs, nil
	}
	seen := func(r *store.Record) bool { return r.State == store.StatePaused && rolling[r.ID] }
	out := recs[:0:0]
	for _, r := range recs {
		switch {
		case !seen(r):
			out = append(out, r)
		case f.State != store.StatePaused:
			r.State, r.Reason = store.StateRunning, ""
			out = append(out, r)
		}
	}
	if f.State != store.StateRunning {
		return out, nil
	}
	pf := f
	pf.State = store.StatePaused
	paused, err := s.store.ListSandboxes(ctx, pf)
	if err != nil {
		return nil, err
	}
	for _, r := range paused {
		if seen(r) {
			r.State, r.Reason = store.StateRunning, ""
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// awaitChange waits for a change of tenant's sandbox id (changes.wait).
// Another tenant's sandbox is not waited for: its requests answer 404 at
// once, as for a sandbox that does not exist.
func (s *Server) awaitChange(ctx context.Context, tenant, id string) error {
	if !s.changes.active(id) {
		return nil
	}
	if _, err := s.store.GetSandbox(ctx, tenant, id); err != nil {
		return nil
	}
	return s.changes.wait(ctx, id)
}

// explain turns the "closed" error of a request that was running on l
// when a change ended its processes into a 409 that says so: the sandbox
// is not gone (410), it was changed under the request.
func (l *live) explain(err error) error {
	if l == nil || err == nil || !errors.Is(err, sandbox.ErrClosed) {
		return err
	}
	var he *httpError
	if errors.As(err, &he) {
		return err
	}
	l.mu.Lock()
	what := l.changedBy
	l.mu.Unlock()
	if what == "" {
		return err
	}
	return &httpError{api.CodeConflict, fmt.Errorf("sandbox %q was %s while this request ran (its processes were ended; send it again): %w", l.sb.ID(), what, err)}
}

// heldLive is the live sandbox a request works on, once looked up: its
// errors are explained by what happened to it (writeError).
type heldLive struct {
	mu sync.Mutex
	l  *live
}

func (h *heldLive) set(l *live) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.l = l
	h.mu.Unlock()
}

func (h *heldLive) explain(err error) error {
	if h == nil {
		return err
	}
	h.mu.Lock()
	l := h.l
	h.mu.Unlock()
	return l.explain(err)
}
