package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/objstore"
	"github.com/airlock-dev/airlock/server/store"
)

// cloneSource is what new sandboxes are made from (a fork's running
// sandbox, or a snapshot): the request and files of a sandbox.
type cloneSource struct {
	what    string // "fork sandbox \"sb-1\"": errors start with it
	tenant  string
	req     api.CreateSandboxRequest
	trusted bool
	imageID string         // "" without an image
	owner   objstore.Owner // host id range base of the workspace's files
	ws      string         // its workspace
	upper   string         // an image sandbox's writable layer's upper directory ("" none)
	// still holds the source still while it is read (a running
	// sandbox's processes frozen, one checkpoint at a time); it returns
	// what lets go.
	still func() func()
}

// newCopy is one sandbox being made from a cloneSource, not yet
// registered.
type newCopy struct {
	id      string
	plan    *createPlan
	profile string
	pol     *policy.Policy
	ws      string
	root    *images.Rootfs
	dsk     *disk
	release func() // its quota
	l       *live
	polJSON []byte
}

// undo takes back everything c holds (a fork that failed).
func (s *Server) undoCopy(c *newCopy) {
	if c.l != nil {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c.l.sb.Destroy(dctx)
		cancel()
		if c.l.volumes != nil {
			c.l.volumes()
		}
	}
	if c.dsk != nil {
		s.releaseDisk(c.dsk)
	}
	c.root.Release()
	if c.release != nil {
		c.release()
	}
	s.forgetLife(context.Background(), c.id)
}

// cloneMany makes req.Count sandboxes of src's files and settings, all or
// none: on error every one made is taken back (files, quota, image
// leases, processes) and no row is left.
func (s *Server) cloneMany(ctx context.Context, src *cloneSource, req api.ForkRequest) (api.ForkResult, error) {
	var res api.ForkResult
	n := req.Count
	if n == 0 {
		n = 1
	}
	if n < 0 || n > api.MaxForkCount {
		return res, errBadRequest("%s: count %d: want 1 to %d", src.what, n, api.MaxForkCount)
	}
	creq := src.req
	if req.Timeout != 0 {
		creq.Timeout = req.Timeout
	}
	creq.Labels = maps.Clone(creq.Labels)
	for k, v := range req.Labels {
		if creq.Labels == nil {
			creq.Labels = map[string]string{}
		}
		if v == "" {
			delete(creq.Labels, k)
		} else {
			creq.Labels[k] = v
		}
	}
	copies := make([]*newCopy, 0, n)
	undo := func() {
		for _, c := range copies {
			s.undoCopy(c)
		}
	}
	for range n {
		c, err := s.prepareCopy(ctx, src, creq)
		if err != nil {
			undo()
			return res, err
		}
		copies = append(copies, c)
	}
	start := time.Now()
	st, err := s.fillCopies(src, copies)
	res.Copy = api.CopyReport{Method: st.method(), Files: st.Files, Bytes: st.Bytes, Skipped: st.Skipped, Millis: time.Since(start).Milliseconds()}
	for _, c := range copies {
		if err != nil {
			break
		}
		var unmount func()
		c.l, c.polJSON, unmount, err = s.startOn(ctx, src.tenant, c.id, c.plan, c.profile, c.pol, c.ws, c.plan.req.Volumes, c.root, c.dsk, src.owner)
		if err != nil {
			unmount()
		}
	}
	if err != nil {
		undo()
		return res, fmt.Errorf("%s: %w", src.what, err)
	}
	res.Sandboxes, err = s.registerCopies(ctx, src, copies)
	return res, err
}

// prepareCopy plans one copy of src (request creq): its quota, image
// lease, policy and empty files. On error nothing is left.
func (s *Server) prepareCopy(ctx context.Context, src *cloneSource, creq api.CreateSandboxRequest) (*newCopy, error) {
	c := &newCopy{id: newID("sb-")}
	fail := func(err error) (*newCopy, error) {
		s.undoCopy(c)
		return nil, fmt.Errorf("%s: %w", src.what, err)
	}
	var err error
	if c.plan, err = s.planCreate(caller{tenant: src.tenant, trusted: src.trusted}, creq); err != nil {
		return fail(err)
	}
	if c.profile = c.plan.req.Profile; c.profile == "" {
		c.profile = "default"
	}
	if src.imageID != "" {
		if s.cfg.Images == nil {
			return fail(fmt.Errorf("image %s: this server has no image store: %w", src.imageID, sandbox.ErrUnavailable))
		}
		if c.root, err = s.cfg.Images.Acquire(ctx, src.imageID, c.id, images.AcquireOptions{}); err != nil {
			return fail(err)
		}
	}
	if c.pol, c.ws, err = s.resolve(c.id, c.plan.backend, c.profile, c.plan.raw, c.root); err != nil {
		return fail(err)
	}
	if err = c.plan.ceil.Fit(src.tenant, c.plan.asked, c.pol); err != nil {
		return fail(err)
	}
	if c.release, err = s.reserve(ctx, src.tenant, c.plan.backend.Name(), s.chargeOf(c.pol), ""); err != nil {
		return fail(err)
	}
	if c.dsk, err = s.makeDisk(ctx, c.id, c.ws, int64(c.pol.Limits.DiskBytes)); err != nil {
		return fail(err)
	}
	if keepsLayer(c.plan.backend, c.root) {
		if _, err = s.writableLayer(c.id, c.dsk, c.pol, false); err != nil {
			return fail(err)
		}
	}
	if (src.upper != "") != (c.dsk.layer != "") {
		return fail(fmt.Errorf("the source's writable layer and its copy's do not match (was the image or backend changed?): %w", sandbox.ErrInvalid))
	}
	return c, nil
}

// fillCopies copies src's files into the first copy (src held still
// meanwhile) and the first copy's into the others, which nothing runs in
// yet: the source is held for one copy's time whatever the count. The
// stats are one copy's.
func (s *Server) fillCopies(src *cloneSource, copies []*newCopy) (cloneStats, error) {
	var first cloneStats
	for i, c := range copies {
		from, upper := src.ws, src.upper
		if i > 0 {
			from, upper = copies[0].dsk.workspace, filepath.Join(copies[0].dsk.layer, "upper")
		}
		var let func()
		if i == 0 && src.still != nil {
			let = src.still()
		}
		st, err := cloneTree(from, c.dsk.workspace)
		if err == nil && upper != "" && src.upper != "" {
			var up cloneStats
			up, err = cloneTree(upper, filepath.Join(c.dsk.layer, "upper"))
			st.add(up)
		}
		if let != nil {
			let()
		}
		if err != nil {
			return first, fmt.Errorf("copy its files: %w", err)
		}
		if i == 0 {
			first = st
		}
	}
	return first, nil
}

// registerCopies makes the started copies live: their rows, lifecycle
// records and reapers. A store that fails part way takes back the rest
// and destroys those registered (stopped rows, no files).
func (s *Server) registerCopies(ctx context.Context, src *cloneSource, copies []*newCopy) ([]api.Sandbox, error) {
	out := make([]api.Sandbox, 0, len(copies))
	var done []*live
	for i, c := range copies {
		l, plan := c.l, c.plan
		now := time.Now().UTC()
		rec := &store.Record{
			ID: c.id, Tenant: src.tenant, Backend: l.backend, Profile: l.profile, Image: plan.req.Image,
			Spec: c.polJSON, Labels: plan.req.Labels, Env: plan.req.Env, State: store.StateRunning,
			Memory: l.memory, KeepAlive: plan.req.KeepAlive, CreatedAt: now, ExpiresAt: now.Add(plan.timeout),
		}
		err := s.store.InsertSandbox(ctx, rec)
		if err == nil {
			err = s.recordLife(ctx, l, caller{tenant: src.tenant, trusted: src.trusted}, plan.req)
		}
		if err != nil {
			for _, r := range copies[i:] {
				s.undoCopy(r)
			}
			for _, d := range done {
				s.destroy(d, src.what+" failed")
			}
			return nil, fmt.Errorf("%s: %w", src.what, err)
		}
		l.mu.Lock()
		l.rec = rec
		l.expires, l.keepAlive = rec.ExpiresAt, rec.KeepAlive
		l.mu.Unlock()
		s.mu.Lock()
		s.live[rec.ID] = l
		s.mu.Unlock()
		s.watch(l)
		done = append(done, l)
		s.events.emit(audit.Event{Sandbox: rec.ID, Type: audit.TypeStart, Message: "created: " + src.what,
			Fields: map[string]any{"tenant": src.tenant, "backend": l.backend}})
		out = append(out, s.view(l, rec, false))
	}
	return out, nil
}

// forkSource is a running sandbox as a cloneSource. Only sandboxes whose
// files the server keeps (those that can be paused) can be forked.
func (s *Server) forkSource(ctx context.Context, l *live, what string) (*cloneSource, error) {
	id := l.sb.ID()
	l.mu.Lock()
	ls, tenant, ws, layer := l.life, l.rec.Tenant, l.disk.workspace, l.disk.layer
	l.mu.Unlock()
	if !ls.pausable {
		return nil, fmt.Errorf("%s: %s (fork and snapshots keep a sandbox's files; the native backend's can be kept): %w", what, ls.why, sandbox.ErrNotSupported)
	}
	lr, err := s.store.GetLifecycle(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	src := &cloneSource{what: what, tenant: tenant, trusted: lr.Trusted, imageID: lr.Image, owner: ls.owner, ws: ws}
	if err := json.Unmarshal(lr.Request, &src.req); err != nil {
		return nil, fmt.Errorf("%s: stored request: %w", what, err)
	}
	if layer != "" {
		src.upper = filepath.Join(layer, "upper")
	}
	src.still = func() func() {
		ls.cp.Lock() // no rollback replaces the workspace meanwhile
		thaw := s.holdStill(ctx, l)
		return func() { thaw(); ls.cp.Unlock() }
	}
	return src, nil
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.ForkRequest
	if r.ContentLength != 0 && !s.decodeBody(w, r, &req) {
		return
	}
	src, err := s.forkSource(r.Context(), l, fmt.Sprintf("fork sandbox %q", l.sb.ID()))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cloneMany(r.Context(), src, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypeStart, Message: "forked",
		Fields: map[string]any{"count": len(res.Sandboxes), "method": res.Copy.Method, "bytes": res.Copy.Bytes}})
	writeJSON(w, http.StatusCreated, res)
}
