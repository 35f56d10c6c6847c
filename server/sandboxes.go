package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/admission"
	"github.com/airlock-dev/airlock/server/store"
)

func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}

// checkInline refuses, for callers with an API key, inline policy fields
// that name host resources: a tenant must not mount host paths, read host
// secrets or environment, or write audit files on the server's host.
func checkInline(p *policy.Policy, trusted bool, ceil *admission.Ceiling) error {
	if trusted {
		return nil
	}
	fs := p.Filesystem
	bad := []string{}
	if fs.Rootfs != "" {
		bad = append(bad, "filesystem.rootfs (use image)")
	}
	if fs.Workspace != "" {
		bad = append(bad, "filesystem.workspace")
	}
	if len(fs.ReadOnly) > 0 && len(ceil.HostPaths) == 0 {
		bad = append(bad, "filesystem.read_only")
	}
	if len(fs.ReadWrite) > 0 {
		bad = append(bad, "filesystem.read_write")
	}
	if len(p.Secrets) > 0 {
		bad = append(bad, "secrets")
	}
	if len(p.Process.EnvAllow) > 0 {
		bad = append(bad, "process.env_allow")
	}
	if p.Process.UID != nil || p.Process.GID != nil {
		bad = append(bad, "process.uid/gid")
	}
	if p.Audit.File != "" {
		bad = append(bad, "audit.file")
	}
	if p.AllowDegraded {
		bad = append(bad, "allow_degraded")
	}
	if len(bad) > 0 {
		return fmt.Errorf("create sandbox: policy fields not allowed over an API key: %s: %w", strings.Join(bad, ", "), sandbox.ErrPermission)
	}
	return nil
}

// workspaceMount is where a server sandbox's workspace appears inside.
const workspaceMount = "/workspace"

// checkImage checks that the server's image store has image (a
// reference: "debian:bookworm"); "" is no image.
func (s *Server) checkImage(ctx context.Context, image string) (string, error) {
	if image == "" {
		return "", nil
	}
	if filepath.IsAbs(image) {
		return "", fmt.Errorf("create sandbox: image %q is a directory: images come from the server's image store now (airlock image import/pull, or POST /v1/images/pull), not a directory of root filesystems: %w", image, sandbox.ErrInvalid)
	}
	if s.cfg.Images == nil {
		return "", fmt.Errorf("create sandbox: image %q: this server has no image store: %w", image, sandbox.ErrInvalid)
	}
	if _, err := s.cfg.Images.Inspect(ctx, image); err != nil {
		return "", fmt.Errorf("create sandbox: %w", err)
	}
	return image, nil
}

// checkImageRef accepts a docker image reference: name[:tag][@digest]
// in the characters references use.
func checkImageRef(ref string) error {
	if len(ref) > 255 || strings.Trim(ref, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") != "" || strings.HasPrefix(ref, "-") {
		return fmt.Errorf("create sandbox: image %q: not a docker image reference: %w", ref, sandbox.ErrInvalid)
	}
	return nil
}

// checkFields validates a create request's labels, env and access token
// scopes.
func checkFields(req api.CreateSandboxRequest) error {
	if err := checkLabels(req.Labels); err != nil {
		return err
	}
	if err := checkEnv(req.Env); err != nil {
		return err
	}
	return checkTokenScopes(req.AccessTokens)
}

// createPlan is a validated create request.
type createPlan struct {
	req         api.CreateSandboxRequest
	backend     sandbox.Backend
	raw         *policy.Policy // inline policy or nil
	image       string         // a store image reference or ""
	dockerImage string         // a docker daemon image reference (docker backend only)
	timeout     time.Duration
	ceil        *admission.Ceiling // nil for the trusted socket
	asked       *policy.Policy     // the inline policy as the request sent it (nil: none)
}

func (s *Server) planCreate(c caller, req api.CreateSandboxRequest) (*createPlan, error) {
	p := &createPlan{req: req}
	if req.Backend == "" {
		req.Backend = s.cfg.DefaultBackend
		p.req.Backend = req.Backend
	}
	b, ok := s.cfg.Backends[req.Backend]
	if !ok {
		return nil, fmt.Errorf("create sandbox: unknown backend %q (this server has %s): %w", req.Backend, s.backendNames(), sandbox.ErrInvalid)
	}
	p.backend = b
	ceil := s.ceiling(c)
	if ceil != nil {
		if err := ceil.CheckRequest(c.tenant, req.Backend, req.Image, req.Profile); err != nil {
			return nil, err
		}
	}
	if err := checkFields(req); err != nil {
		return nil, err
	}
	p.timeout = req.Timeout.D()
	if p.timeout == 0 {
		p.timeout = s.cfg.DefaultTimeout
	}
	if p.timeout > s.cfg.MaxTimeout {
		return nil, fmt.Errorf("create sandbox: timeout %s: longer than %s: %w", p.timeout, s.cfg.MaxTimeout, sandbox.ErrInvalid)
	}
	if len(req.Policy) > 0 && string(req.Policy) != "null" {
		raw, err := s.cfg.Policies.ParseRaw(withVersion(req.Policy))
		if err != nil {
			return nil, fmt.Errorf("create sandbox: policy: %w", err)
		}
		if err := checkInline(raw, c.trusted, ceil); err != nil {
			return nil, err
		}
		if !c.trusted {
			if err := ceil.CheckHostPaths(c.tenant, raw); err != nil {
				return nil, err
			}
		}
		if raw.Backend != "" && raw.Backend != req.Backend {
			return nil, fmt.Errorf("create sandbox: policy names backend %q, request %q: %w", raw.Backend, req.Backend, sandbox.ErrInvalid)
		}
		p.raw = raw
	}
	// What the request asked itself (before the ceiling's defaults): only
	// that is refused beyond the ceiling; defaults and the profile's
	// values are lowered to it.
	p.asked = p.raw
	if ceil != nil && ceil.HasDefaults() {
		p.raw = ceil.WithDefaults(p.raw)
	}
	p.ceil = ceil
	if (b.Name() == "docker" || b.Name() == "kubernetes") && req.Image != "" {
		// A docker image is the daemon's, a kubernetes one the cluster's:
		// its name goes to the backend as it is (the backend refuses one
		// the daemon or the cluster lacks).
		if err := checkImageRef(req.Image); err != nil {
			return nil, err
		}
		p.dockerImage = req.Image
		return p, nil
	}
	image := req.Image
	if p.raw != nil && p.raw.Filesystem.Image != "" {
		if image != "" && image != p.raw.Filesystem.Image {
			return nil, fmt.Errorf("create sandbox: policy names image %q, request %q: %w", p.raw.Filesystem.Image, image, sandbox.ErrInvalid)
		}
		image = p.raw.Filesystem.Image
	}
	img, err := s.checkImage(context.Background(), image)
	if err != nil {
		return nil, err
	}
	p.image = img
	return p, nil
}

func (s *Server) backendNames() string {
	var n []string
	for k := range s.cfg.Backends {
		n = append(n, k)
	}
	return strings.Join(n, ", ")
}

// resolve resolves the policy of a new sandbox id, with the image's
// config when it has one.
func (s *Server) resolve(id string, backend sandbox.Backend, profile string, raw *policy.Policy, root *images.Rootfs) (*policy.Policy, string, error) {
	ws := s.workspacePath(id)
	raw = raw.Clone() // nil: an empty policy
	if root != nil {
		if err := root.Apply(raw); err != nil {
			return nil, "", fmt.Errorf("create sandbox: %w", err)
		}
	}
	// Every server sandbox has its workspace (and home) at a stable path,
	// so that nothing it or its tenant sees names the server's layout.
	if raw.Filesystem.WorkspaceMount == "" {
		raw.Filesystem.WorkspaceMount = workspaceMount
	}
	pol, err := s.cfg.Policies.Resolve(raw, profile, ws, "")
	if err != nil {
		return nil, "", fmt.Errorf("create sandbox: policy: %w", err)
	}
	if pol.Backend != "" && pol.Backend != "auto" && pol.Backend != backend.Name() {
		return nil, "", fmt.Errorf("create sandbox: policy names backend %q, request %q: %w", pol.Backend, backend.Name(), sandbox.ErrInvalid)
	}
	if pol.Process.Env["HOME"] == ws {
		pol.Process.Env["HOME"] = pol.Filesystem.WorkspaceInside()
	}
	return pol, ws, nil
}

// coldCreate makes a new sandbox (not from a pool). On error nothing is left.
func (s *Server) coldCreate(ctx context.Context, id string, backend sandbox.Backend, profile string, pol *policy.Policy, ws string, root *images.Rootfs, dockerImage string, vols []sandbox.Bind) (*live, []byte, error) {
	return s.createOn(ctx, id, backend, profile, pol, ws, root, dockerImage, vols, nil)
}

// createOn is coldCreate on the files dsk when set (a paused sandbox's,
// which a failure leaves as they are), else on new ones.
func (s *Server) createOn(ctx context.Context, id string, backend sandbox.Backend, profile string, pol *policy.Policy, ws string, root *images.Rootfs, dockerImage string, vols []sandbox.Bind, dsk *disk) (*live, []byte, error) {
	// What the API shows of the policy: the sandbox's view, no host paths.
	polJSON, err := json.Marshal(pol.SandboxView())
	if err != nil {
		return nil, nil, fmt.Errorf("create sandbox: encode policy: %w", err)
	}
	releaseDisk := func(*disk) error { return nil }
	resume := dsk != nil
	if !resume {
		if dsk, err = s.makeDisk(ctx, id, ws, int64(pol.Limits.DiskBytes)); err != nil {
			return nil, nil, err
		}
		releaseDisk = s.releaseDisk
	}
	layer := ""
	if keepsLayer(backend, root) {
		if layer, err = s.writableLayer(id, dsk, pol, resume); err != nil {
			releaseDisk(dsk)
			return nil, nil, err
		}
	}
	sink := s.events.sink(id, backend.Name(), s.cfg.EventRate)
	log := s.log.With("sandbox", id, "backend", backend.Name())
	ecfg := egress.Config{SandboxID: id, Network: pol.Network, Secrets: pol.Secrets, Audit: sink, Log: log}
	if s.cfg.EgressConfig != nil {
		s.cfg.EgressConfig(&ecfg)
	}
	proxy, err := egress.New(ecfg)
	if err != nil {
		releaseDisk(dsk)
		return nil, nil, fmt.Errorf("create sandbox %q: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
	defer cancel()
	start := time.Now()
	spec := sandbox.Spec{ID: id, Policy: pol, Image: dockerImage, Audit: sink, Log: log, OwnWorkspace: true, Scratch: dsk.scratch, Caches: vols}
	if root != nil {
		spec.Image, spec.Root = pol.Filesystem.Image, root.SandboxRoot()
		spec.Root.Writable = layer
	}
	// Every server sandbox gets its own proxy, so that the rules of one
	// created with a network can be changed later, from outside only.
	proxy.Attach(&spec, s.cfg.CABundle)
	sb, err := backend.Create(ctx, spec)
	if err != nil {
		releaseDisk(dsk)
		return nil, nil, fmt.Errorf("create sandbox %q: %w", id, err)
	}
	s.metrics.backendCreate.WithLabelValues(backend.Name()).Observe(time.Since(start).Seconds())
	workdir := pol.Process.Workdir
	if workdir == "" {
		workdir = pol.Filesystem.WorkspaceInside()
	}
	l := newLive(sb, backend.Name(), profile, ws, workdir, int64(pol.Limits.Memory))
	l.disk, l.diskUse = dsk, s.diskCharge(pol)
	l.image = root
	l.proxy = proxy
	l.netless = pol.Network.Mode == "" || pol.Network.Mode == policy.NetworkNone
	l.protect = admission.NewProtection(pol)
	l.life = s.lifeOf(l, pol, root, dockerImage)
	return l, polJSON, nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	var req api.CreateSandboxRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	plan, err := s.planCreate(c, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	start := time.Now()
	l, polJSON, release, err := s.obtain(r.Context(), c, plan)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := time.Now().UTC()
	rec := &store.Record{
		ID: l.sb.ID(), Tenant: c.tenant, Backend: l.backend, Profile: l.profile, Image: plan.req.Image,
		Spec: polJSON, Labels: plan.req.Labels, Env: plan.req.Env, State: store.StateRunning,
		Memory: l.memory, KeepAlive: plan.req.KeepAlive, CreatedAt: now, ExpiresAt: now.Add(plan.timeout),
	}
	if err := s.store.InsertSandbox(r.Context(), rec); err != nil {
		release()
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l.sb.Destroy(dctx)
		cancel()
		l.image.Release()
		if l.volumes != nil {
			l.volumes()
		}
		s.releaseDisk(l.disk)
		s.writeError(w, r, err)
		return
	}
	life := plan.req
	life.AccessTokens = nil // a resume hands out none
	if err := s.recordLife(r.Context(), l, c, life); err != nil {
		s.log.Error("store lifecycle", "sandbox", rec.ID, "err", err)
	}
	l.mu.Lock()
	l.rec = rec
	l.expires, l.keepAlive = rec.ExpiresAt, rec.KeepAlive
	l.mu.Unlock()
	l.touch() // a pooled sandbox's idle time starts at hand-out
	s.mu.Lock()
	if s.ctx.Err() != nil {
		// Shutdown has already collected the live sandboxes.
		s.live[rec.ID] = l
		s.mu.Unlock()
		s.destroy(l, "server shutdown")
		s.writeError(w, r, fmt.Errorf("create sandbox: server shutting down: %w", sandbox.ErrUnavailable))
		return
	}
	s.live[rec.ID] = l
	s.mu.Unlock()
	s.watch(l)
	s.events.emit(audit.Event{Sandbox: rec.ID, Type: audit.TypeStart, Message: "created through the API",
		Fields: map[string]any{"tenant": c.tenant, "backend": l.backend, "profile": l.profile, "pooled": l.pooled}})
	s.metrics.createTotal.WithLabelValues(l.backend, fmt.Sprint(l.pooled)).Observe(time.Since(start).Seconds())
	s.log.Info("sandbox created", "sandbox", rec.ID, "tenant", c.tenant, "backend", l.backend, "pooled", l.pooled)
	v := s.view(l, rec, false)
	v.AccessTokens = s.createTokens(rec.ID, c.tenant, plan.req.AccessTokens)
	writeJSON(w, http.StatusCreated, v)
}

// obtain takes quota and then a pooled sandbox when the request fits a
// pool, else creates one. release gives the quota back (only for failures
// before the sandbox is registered; afterwards destroy releases it).
func (s *Server) obtain(ctx context.Context, c caller, plan *createPlan) (*live, []byte, func(), error) {
	profile := plan.req.Profile
	if profile == "" {
		profile = "default"
	}
	if l, polJSON, release, err := s.fromProfilePool(ctx, c, plan, profile); l != nil || err != nil {
		return l, polJSON, release, err
	}
	if l, polJSON, release, err := s.fromImagePool(ctx, c, plan, profile); l != nil || err != nil {
		return l, polJSON, release, err
	}
	id := newID("sb-")
	var root *images.Rootfs
	if plan.image != "" {
		var err error
		if root, err = s.cfg.Images.Acquire(ctx, plan.image, id, images.AcquireOptions{}); err != nil {
			return nil, nil, nil, fmt.Errorf("create sandbox: %w", err)
		}
	}
	pol, ws, err := s.resolve(id, plan.backend, profile, plan.raw, root)
	if err != nil {
		root.Release()
		return nil, nil, nil, err
	}
	if err := plan.ceil.Fit(c.tenant, plan.asked, pol); err != nil {
		return nil, nil, nil, fmt.Errorf("create sandbox: %w", err)
	}
	if err := checkVolumeMounts(plan.req.Volumes, plan.backend.Name(), pol, plan.ceil, c.tenant); err != nil {
		root.Release()
		return nil, nil, nil, err
	}
	release, err := s.reserve(ctx, c.tenant, plan.backend.Name(), s.chargeOf(pol), "")
	if err != nil {
		root.Release()
		return nil, nil, nil, err
	}
	binds, unmount, err := s.mountVolumes(ctx, c.tenant, id, plan.req.Volumes)
	if err != nil {
		root.Release()
		release()
		return nil, nil, nil, err
	}
	l, polJSON, err := s.coldCreate(ctx, id, plan.backend, profile, pol, ws, root, plan.dockerImage, binds)
	if err != nil {
		unmount()
		root.Release()
		release()
		return nil, nil, nil, err
	}
	l.volumes = unmount
	s.noteDemand(c, plan, profile)
	return l, polJSON, release, nil
}

// fromProfilePool hands out a sandbox of a profile pool (--pool) to a
// create naming no image, policy or volume; nil when none fits.
func (s *Server) fromProfilePool(ctx context.Context, c caller, plan *createPlan, profile string) (*live, []byte, func(), error) {
	if plan.raw != nil || plan.image != "" || plan.dockerImage != "" || len(plan.req.Volumes) > 0 {
		return nil, nil, nil, nil
	}
	s.mu.Lock()
	pl := s.pools[poolKey{backend: plan.backend.Name(), profile: profile}]
	s.mu.Unlock()
	if pl == nil || !pl.fits(func(pol *policy.Policy) error { return plan.ceil.Fit(c.tenant, pol, pol.Clone()) }) {
		return nil, nil, nil, nil
	}
	need, ok := pl.charge()
	if !ok {
		return nil, nil, nil, nil
	}
	release, err := s.reserve(ctx, c.tenant, plan.backend.Name(), need, "")
	if err != nil {
		return nil, nil, nil, err
	}
	if it, ok := pl.take(""); ok {
		return it.l, it.polJSON, release, nil
	}
	release()
	return nil, nil, nil, nil
}

// view renders l (or a stored record) for the API.
func (s *Server) view(l *live, rec *store.Record, withStats bool) api.Sandbox {
	v := api.Sandbox{
		ID: rec.ID, Backend: rec.Backend, Profile: rec.Profile, Image: rec.Image, State: rec.State,
		Reason: rec.Reason, Labels: rec.Labels, KeepAlive: rec.KeepAlive, MemoryMax: rec.Memory,
		CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt, EndedAt: rec.EndedAt, Policy: rec.Spec,
	}
	if l != nil {
		l.mu.Lock()
		v.KeepAlive, v.ExpiresAt = l.keepAlive, l.expires
		v.KeepAliveWhile, v.AutoResume, v.Verified = l.life.keepWhile, l.life.autoResume, l.life.verified
		v.PublicPorts, v.OnTimeout = l.life.publicPorts, l.life.onTimeout
		if l.life.frozen {
			v.State = api.StateFrozen
		}
		l.mu.Unlock()
		v.Pooled, v.Workdir = l.pooled, l.workdir
		if rr, ok := l.sb.(sandbox.RuntimeReporter); ok {
			v.Runtime = rr.Runtime()
		}
		if withStats {
			v.Env = rec.Env
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if st, err := l.sb.Stats(ctx); err == nil {
				v.Stats = apiStats(st)
			}
			cancel()
		}
	}
	return v
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	q := r.URL.Query()
	f := store.ListFilter{Tenant: c.tenant, State: q.Get("state"), Labels: map[string]string{}}
	switch f.State {
	case "", store.StateRunning, store.StateStopped, store.StatePaused:
	default:
		s.writeError(w, r, errBadRequest("state %q: want running, paused or stopped", f.State))
		return
	}
	if len(q["label"]) > maxLabels {
		s.writeError(w, r, errBadRequest("label filter: at most %d labels", maxLabels))
		return
	}
	for _, lv := range q["label"] {
		k, v, ok := strings.Cut(lv, "=")
		if !ok || k == "" {
			s.writeError(w, r, errBadRequest("label filter %q: want key=value", lv))
			return
		}
		f.Labels[k] = v
	}
	if f.State == "" && q.Get("all") != "true" {
		f.State = store.StateRunning
	}
	recs, err := s.listAsSeen(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.SandboxList{Sandboxes: []api.Sandbox{}}
	for _, rec := range recs {
		l := s.liveByID(rec.ID)
		out.Sandboxes = append(out.Sandboxes, s.view(l, rec, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	rec := s.stored(w, r)
	if rec == nil {
		return
	}
	l := s.liveByID(rec.ID)
	// Reading metadata is not use: it does not keep a sandbox from idling.
	writeJSON(w, http.StatusOK, s.view(l, rec, true))
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	id := r.PathValue("id")
	if err := s.awaitChange(r.Context(), c.tenant, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := s.lookupAny(c.tenant, id)
	if err != nil {
		// A stopped sandbox of this tenant: deleting it again is a no-op.
		rec, gerr := s.store.GetSandbox(r.Context(), c.tenant, id)
		if gerr == nil && rec.State == store.StatePaused {
			if err := s.destroyPaused(r.Context(), rec, "deleted through the API"); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if gerr == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		s.writeError(w, r, err)
		return
	}
	if err := s.destroy(l, "deleted through the API"); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.PatchSandboxRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.Timeout != nil && req.Timeout.D() > s.cfg.MaxTimeout {
		s.writeError(w, r, errBadRequest("timeout %s: longer than %s", req.Timeout.D(), s.cfg.MaxTimeout))
		return
	}
	l.mu.Lock()
	if req.Timeout != nil {
		l.expires = time.Now().UTC().Add(req.Timeout.D())
	}
	if req.KeepAlive != nil {
		l.keepAlive = *req.KeepAlive
	}
	expires, keep, rec := l.expires, l.keepAlive, l.rec
	rec.ExpiresAt, rec.KeepAlive = expires, keep
	l.mu.Unlock()
	if err := s.store.UpdateLifetime(r.Context(), rec.ID, expires, keep); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(l, rec, false))
}

// handleNetwork replaces the network rules of a running sandbox. Only the
// API (outside) can do this; nothing inside the sandbox reaches it.
func (s *Server) handleNetwork(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.NetworkRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	switch req.Mode {
	case policy.NetworkNone, policy.NetworkAllowlist, policy.NetworkOpen:
	default:
		s.writeError(w, r, errBadRequest("network mode %q: want none, allowlist or open", req.Mode))
		return
	}
	if len(req.Allow)+len(req.Deny) > 1024 {
		s.writeError(w, r, errBadRequest("network: at most 1024 rules"))
		return
	}
	if l.netless && req.Mode != policy.NetworkNone {
		// Backends start the in-sandbox proxy listener only for sandboxes
		// created with a network; rules can narrow or widen it later, but
		// not conjure it.
		s.writeError(w, r, fmt.Errorf("set network of %q: created with network mode none, it has no egress path; create it with mode allowlist (and no allow entries) to change rules later: %w", l.sb.ID(), sandbox.ErrNotSupported))
		return
	}
	if l.proxy == nil {
		s.writeError(w, r, fmt.Errorf("set network of %q: the sandbox has no egress proxy: %w", l.sb.ID(), sandbox.ErrNotSupported))
		return
	}
	n := policy.Network{Mode: req.Mode, Allow: req.Allow, Deny: req.Deny}
	// Request rules change only when given; the git preset and budgets stay.
	cur := l.proxy.Network()
	n.Requests, n.Git, n.Budgets = cur.Requests, cur.Git, cur.Budgets
	if req.Requests != nil {
		rules, err := requestRulesOf(*req.Requests)
		if err != nil {
			s.writeError(w, r, fmt.Errorf("set network of %q: %w", l.sb.ID(), err))
			return
		}
		n.Requests = rules
	}
	if err := s.checkNetworkRequest(c, n); err != nil {
		s.writeError(w, r, fmt.Errorf("set network of %q: %w", l.sb.ID(), err))
		return
	}
	if err := l.proxy.SetNetwork(n); err != nil {
		s.writeError(w, r, fmt.Errorf("set network of %q: %w", l.sb.ID(), err))
		return
	}
	s.events.emit(audit.Event{Sandbox: l.sb.ID(), Type: audit.TypePolicy, Message: "network rules changed through the API",
		Fields: map[string]any{"tenant": c.tenant, "mode": n.Mode, "allow": n.Allow, "deny": n.Deny, "requests": ruleStrings(n.Requests)}})
	writeJSON(w, http.StatusOK, req)
}

// requestRulesOf converts and checks the API's request rules one by one,
// so a refusal names the rule (its index and CLI form).
func requestRulesOf(in []api.RequestRule) ([]policy.RequestRule, error) {
	if len(in) > 1024 {
		return nil, errBadRequest("network: at most 1024 request rules")
	}
	out := make([]policy.RequestRule, 0, len(in))
	for i, a := range in {
		r := policy.RequestRule{Host: a.Host, Methods: a.Methods, Path: a.Path, Query: a.Query,
			Headers: a.Headers, Action: a.Action, Programs: a.Programs}
		if _, err := policy.CompileRequests(policy.Network{Requests: []policy.RequestRule{r}}); err != nil {
			return nil, errBadRequest("network requests[%d] (%s): %v", i, r.String(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

func ruleStrings(rs []policy.RequestRule) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.String())
	}
	return out
}

// withVersion adds "version": 1 to an inline JSON policy object that has
// none: the API is v1, so its policies are too. Anything else is passed on
// for the policy parser to reject with a clear error.
func withVersion(b json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		return b
	}
	if _, ok := m["version"]; ok {
		return b
	}
	m["version"] = json.RawMessage("1")
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}
