package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/server/guestpath"
	"github.com/airlock-dev/airlock/server/store"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
)

// lookup returns tenant's live sandbox id; ErrNotFound for another
// tenant's (never ErrPermission: existence is not disclosed); a conflict
// while it is frozen (its agent answers nothing).
func (s *Server) lookup(tenant, id string) (*live, error) {
	l, err := s.lookupAny(tenant, id)
	if err == nil && l.isFrozen() {
		return nil, errFrozen(id)
	}
	return l, err
}

// lookupAny is lookup of a frozen sandbox too.
func (s *Server) lookupAny(tenant, id string) (*live, error) {
	l := s.liveByID(id)
	if l == nil || l.tenant() != tenant {
		return nil, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	l.mu.Lock()
	closing := l.closing
	l.mu.Unlock()
	if closing {
		return nil, fmt.Errorf("sandbox %q: being destroyed: %w", id, sandbox.ErrClosed)
	}
	return l, nil
}

// liveByID returns the live sandbox id of any tenant (nil if none).
func (s *Server) liveByID(id string) *live {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id]
}

// acquire returns the caller's live sandbox {id} marked in use, and the
// release to defer; on error it has answered the request and returns nil.
func (s *Server) acquire(w http.ResponseWriter, r *http.Request) (*live, func()) {
	l, err := s.lookupResuming(r.Context(), callerOf(r).tenant, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return nil, nil
	}
	callerOf(r).held.set(l)
	return l, l.use()
}

// acquireFile is acquire for a file request: it also cleans ?path= (before
// the sandbox is marked in use).
func (s *Server) acquireFile(w http.ResponseWriter, r *http.Request) (*live, string, func()) {
	l, err := s.lookupResuming(r.Context(), callerOf(r).tenant, r.PathValue("id"))
	if err == nil {
		var p string
		if p, err = guestpath.Clean(r.URL.Query().Get("path")); err == nil {
			callerOf(r).held.set(l)
			return l, p, l.use()
		}
	}
	s.writeError(w, r, err)
	return nil, "", nil
}

// stored returns the caller's sandbox record {id}, live or stopped; on
// error it has answered the request and returns nil.
func (s *Server) stored(w http.ResponseWriter, r *http.Request) *store.Record {
	err := s.awaitChange(r.Context(), callerOf(r).tenant, r.PathValue("id"))
	var rec *store.Record
	if err == nil {
		rec, err = s.store.GetSandbox(r.Context(), callerOf(r).tenant, r.PathValue("id"))
	}
	if err != nil {
		s.writeError(w, r, err)
		return nil
	}
	return rec
}

// reserve takes quota for one sandbox needing need for tenant on
// backend. wasm sandboxes' memory lives in the server process itself:
// their limits together are bounded by WasmMemory, for every tenant.
// Paused sandboxes count as sandboxes, by their memory and by their disk
// (their files are held, a resume needs the memory back); resuming, when
// set, is the paused sandbox being resumed: its hold becomes the
// reservation, and release gives it back as a hold.
func (s *Server) reserve(ctx context.Context, tenant, backend string, need charge, resuming string) (release func(), err error) {
	q, err := s.quotaOf(ctx, tenant)
	if err != nil {
		return nil, err
	}
	stored, unlock, err := s.storedDisk(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.usageOf(tenant)
	held, wasPaused := u.paused[resuming]
	if err := s.checkQuota(tenant, q, u, need, held, wasPaused, stored); err != nil {
		return nil, err
	}
	wasm := backend == "wasm"
	if wasm {
		if need.memory <= 0 {
			return nil, fmt.Errorf("create sandbox: a wasm sandbox's memory is the server's own: it needs a memory limit: %w", sandbox.ErrLimit)
		}
		if s.wasmMemory+need.memory > s.cfg.WasmMemory {
			return nil, fmt.Errorf("create sandbox: wasm sandboxes would use %d of the server's %d bytes for them (serve --wasm-memory): %w", s.wasmMemory+need.memory, s.cfg.WasmMemory, sandbox.ErrLimit)
		}
		s.wasmMemory += need.memory
	}
	if wasPaused {
		delete(u.paused, resuming)
	}
	u.count++
	u.memory += need.memory
	u.disk += need.disk
	var once bool
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if once {
			return
		}
		once = true
		u.count--
		u.memory -= need.memory
		u.disk -= need.disk
		if wasm {
			s.wasmMemory -= need.memory
		}
		if wasPaused {
			u.paused[resuming] = held
		}
	}, nil
}

// quotaOf is tenant's quota, the server's defaults for what it leaves unset.
func (s *Server) quotaOf(ctx context.Context, tenant string) (store.Quota, error) {
	q, err := s.store.GetQuota(ctx, tenant)
	if err != nil {
		return q, err
	}
	if q.MaxSandboxes == 0 {
		q.MaxSandboxes = s.cfg.DefaultQuota.MaxSandboxes
	}
	if q.MaxMemory == 0 {
		q.MaxMemory = s.cfg.DefaultQuota.MaxMemory
	}
	if q.MaxDisk == 0 {
		q.MaxDisk = s.cfg.DefaultQuota.MaxDisk
	}
	return q, nil
}

// checkQuota refuses one more sandbox needing need beyond tenant's quota
// q, u being its usage (held: the hold of the paused sandbox resumed, if
// wasPaused) and stored its disk outside sandboxes. Under s.mu.
func (s *Server) checkQuota(tenant string, q store.Quota, u *usage, need charge, held hold, wasPaused bool, stored int64) error {
	count, mem, dsk := u.count+len(u.paused), u.memory, u.disk+u.pending+stored
	for _, h := range u.paused {
		mem, dsk = mem+h.memory, dsk+h.disk
	}
	if wasPaused {
		count, mem, dsk = count-1, mem-held.memory, dsk-held.disk
	}
	if q.MaxSandboxes > 0 && count+1 > q.MaxSandboxes {
		return fmt.Errorf("create sandbox: tenant %q has %d of %d sandboxes (%d of them paused: delete or resume those): %w", tenant, count, q.MaxSandboxes, len(u.paused), sandbox.ErrLimit)
	}
	if q.MaxMemory > 0 && mem+need.memory > q.MaxMemory {
		return fmt.Errorf("create sandbox: tenant %q would use %d of %d bytes of memory (paused sandboxes count): %w", tenant, mem+need.memory, q.MaxMemory, sandbox.ErrLimit)
	}
	if q.MaxMemory > 0 && need.memory == 0 {
		return fmt.Errorf("create sandbox: tenant %q has a memory quota, the policy sets no memory limit: %w", tenant, sandbox.ErrLimit)
	}
	return s.checkDiskQuota(tenant, q, dsk, need.disk)
}

// usageOf is tenant's usage, made on first use. Under s.mu.
func (s *Server) usageOf(tenant string) *usage {
	u := s.usage[tenant]
	if u == nil {
		u = &usage{paused: map[string]hold{}}
		s.usage[tenant] = u
	}
	return u
}

// holdPaused counts paused sandbox id of tenant (its memory and disk)
// against tenant's quota until it is resumed or destroyed.
func (s *Server) holdPaused(tenant, id string, h hold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usageOf(tenant).paused[id] = h
}

// dropPaused ends the hold of paused sandbox id of tenant.
func (s *Server) dropPaused(tenant, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.usageOf(tenant).paused, id)
}

// destroy ends l for reason: kills its processes, destroys the sandbox,
// removes its workspace, marks it stopped and releases its quota.
// Idempotent; concurrent callers wait for the first.
func (s *Server) destroy(l *live, reason string) error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		<-l.gone
		return nil
	}
	l.closing = true
	rec := l.rec
	l.mu.Unlock()
	defer close(l.gone)

	id := l.sb.ID()
	s.thawForEnd(l)
	l.killProcs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := l.sb.Destroy(ctx)
	if err != nil {
		s.log.Error("destroy sandbox", "sandbox", id, "err", err)
	}
	l.image.Release()
	if l.volumes != nil {
		l.volumes()
	}
	if rerr := s.releaseDisk(l.disk); rerr != nil && err == nil {
		err = fmt.Errorf("destroy sandbox %q: remove workspace: %w", id, rerr)
	}
	if rerr := s.forgetLife(ctx, id); rerr != nil && err == nil {
		err = fmt.Errorf("destroy sandbox %q: %w", id, rerr)
	}
	if rec != nil {
		// Before the sandbox leaves s.live: a follower that no longer
		// finds it is sure to read this event after a flush.
		s.events.emit(audit.Event{Sandbox: id, Type: audit.TypeDestroy, Message: reason})
	}
	s.unregister(l, rec, false)
	if rec != nil {
		if serr := s.store.MarkStopped(ctx, id, reason, time.Now()); serr != nil && err == nil {
			err = serr
		}
		s.metrics.lifetime.WithLabelValues(l.backend).Observe(time.Since(rec.CreatedAt).Seconds())
	}
	s.log.Info("sandbox destroyed", "sandbox", id, "reason", reason)
	return err
}

// unregister takes l out of the live sandboxes and gives its quota back;
// paused: it keeps a paused sandbox's hold (holdPaused).
func (s *Server) unregister(l *live, rec *store.Record, paused bool) {
	id := l.sb.ID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[id] == l {
		delete(s.live, id)
	}
	if rec != nil {
		if u := s.usage[rec.Tenant]; u != nil {
			u.count--
			u.memory -= l.memory
			u.disk -= l.diskUse
			if paused {
				u.paused[id] = hold{memory: l.memory, disk: l.diskUse}
			}
		}
		if l.backend == "wasm" {
			s.wasmMemory -= l.memory
		}
	}
}

// watch destroys l when its sandbox ends by itself (agent died, OOM).
func (s *Server) watch(l *live) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-l.sb.Done():
			s.destroy(l, "sandbox ended")
		case <-l.gone:
		case <-s.ctx.Done():
		}
	}()
}

func (s *Server) reapLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ReapInterval)
	defer t.Stop()
	var lastPrune, lastPaused, lastPools time.Time
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.reap(now)
			if now.Sub(lastPools) >= 5*time.Second {
				lastPools = now
				s.sweepPools(now)
			}
			if now.Sub(lastPaused) >= min(time.Minute, s.cfg.PausedRetention/4) {
				lastPaused = now
				s.expirePaused(now)
			}
			if s.cfg.Retention > 0 && now.Sub(lastPrune) > time.Minute {
				lastPrune = now
				s.prune(now)
			}
		}
	}
}

// reap destroys sandboxes past their expiry (unless kept alive) and idle ones.
func (s *Server) reap(now time.Time) {
	s.mu.Lock()
	var victims, freeze []*live
	var reasons []string
	for _, l := range s.live {
		l.mu.Lock()
		expired := !l.keepAlive && !l.expires.IsZero() && now.After(l.expires)
		expired = l.life.expiredWhile(expired, now, s.cfg.IdleTimeout, l.runningProcsLocked())
		if expired && l.life.onTimeout == api.OnTimeoutPause && !l.closing {
			// Kept alive from now on: the freeze below, not the next reap, decides.
			l.keepAlive = true
			freeze = append(freeze, l)
			l.mu.Unlock()
			continue
		}
		l.mu.Unlock()
		idle := s.cfg.IdleTimeout > 0 && l.busy.Load() == 0 && l.runningProcs() == 0 &&
			now.Sub(time.Unix(0, l.lastUse.Load())) > s.cfg.IdleTimeout
		switch {
		case expired:
			victims, reasons = append(victims, l), append(reasons, "expired")
		case idle:
			victims, reasons = append(victims, l), append(reasons, "idle")
		}
	}
	s.mu.Unlock()
	for _, l := range freeze {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.pauseOnTimeout(l)
		}()
	}
	for i, l := range victims {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.destroy(l, reasons[i])
		}()
	}
}

// prune forgets sandboxes stopped longer than the retention ago.
func (s *Server) prune(now time.Time) {
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	n, err := s.store.Prune(ctx, now.Add(-s.cfg.Retention))
	if err != nil {
		s.log.Error("prune store", "err", err)
		return
	}
	if n > 0 {
		s.log.Info("pruned stopped sandboxes", "count", n, "older_than", s.cfg.Retention)
	}
}
