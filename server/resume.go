package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/internal/volume"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/objstore"
	"github.com/airlock-dev/airlock/server/store"
)

// idRangeWidth is a leased host id range's width (ids 0..65535 inside).
const idRangeWidth = 65536

// resume starts paused sandbox id of tenant again on its files (same ID),
// re-planning the request it was created by, so today's ceilings and
// quotas apply. before, when set, runs on its files before the sandbox
// starts (a rollback's restore) and replaces the check against the
// pause's manifest; dsk, when set, is its files still attached (a
// rollback's). Resuming a running sandbox returns it.
func (s *Server) resume(ctx context.Context, tenant, id string, before func(*disk, objstore.Owner) error, dsk *disk) (*live, error) {
	defer s.resumes.lock(id)()
	return s.resumeLocked(ctx, tenant, id, before, dsk)
}

// resumeLocked is resume with s.resumes held for id.
func (s *Server) resumeLocked(ctx context.Context, tenant, id string, before func(*disk, objstore.Owner) error, dsk *disk) (*live, error) {
	defer s.changes.begin(id, "resumed")()
	rec, err := s.store.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if rec.State == store.StateRunning {
		l, err := s.lookupAny(tenant, id)
		if err == nil && l.isFrozen() {
			err = s.thaw(ctx, l)
		}
		return l, err
	}
	if rec.State != store.StatePaused {
		return nil, &httpError{api.CodeConflict, fmt.Errorf("resume sandbox %q: it is %s (%s): %w", id, rec.State, rec.Reason, sandbox.ErrClosed)}
	}
	lr, err := s.store.GetLifecycle(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("resume sandbox %q: %w", id, err)
	}
	var req api.CreateSandboxRequest
	if err := json.Unmarshal(lr.Request, &req); err != nil {
		return nil, fmt.Errorf("resume sandbox %q: stored request: %w", id, err)
	}
	plan, err := s.planCreate(caller{tenant: tenant, trusted: lr.Trusted}, req)
	if err != nil {
		return nil, fmt.Errorf("resume sandbox %q: %w", id, err)
	}
	profile := plan.req.Profile
	if profile == "" {
		profile = "default"
	}
	root, err := s.imageFor(ctx, id, lr)
	if err != nil {
		return nil, err
	}
	// Until it runs again, a paused sandbox keeps its image held.
	keepImage := func() { s.held.put(id, root) }
	pol, ws, err := s.resolve(id, plan.backend, profile, plan.raw, root)
	if err == nil {
		err = plan.ceil.Fit(tenant, plan.asked, pol)
	}
	if err != nil {
		keepImage()
		return nil, fmt.Errorf("resume sandbox %q: %w", id, err)
	}
	release, err := s.reserve(ctx, tenant, plan.backend.Name(), s.chargeOf(pol), id)
	if err != nil {
		keepImage()
		return nil, err
	}
	old := objstore.Owner{UID: lr.OwnerUID, GID: lr.OwnerGID}
	if dsk == nil {
		if dsk, err = s.openDisk(id, ws); err != nil {
			release()
			keepImage()
			return nil, fmt.Errorf("resume sandbox %q: %w", id, err)
		}
	}
	if lr.Image != "" {
		dsk.layer = s.layerPath(id, dsk) // checked with the workspace
	}
	verified, err := s.prepareFiles(ctx, id, dsk, old, lr.Manifest, before)
	var l *live
	unmount := func() {}
	if err == nil {
		l, rec.Spec, unmount, err = s.startOn(ctx, tenant, id, plan, profile, pol, ws, req.Volumes, root, dsk, old)
	}
	if err != nil {
		unmount()
		s.closeDisk(dsk)
		release()
		keepImage()
		return nil, err
	}
	return s.register(ctx, l, rec, lr, plan, verified)
}

// startOn starts a paused sandbox's processes on its files dsk: its
// named volumes mounted again as its request asked, then its files given
// to the host ids it leased this time (from old). On error nothing it
// started is left; the files are the caller's.
func (s *Server) startOn(ctx context.Context, tenant, id string, plan *createPlan, profile string, pol *policy.Policy, ws string, vols []api.VolumeMount, root *images.Rootfs, dsk *disk, old objstore.Owner) (*live, []byte, func(), error) {
	noop := func() {}
	binds, unmount, err := s.mountVolumes(ctx, tenant, id, vols)
	if err != nil {
		return nil, nil, noop, err
	}
	l, spec, err := s.createOn(ctx, id, plan.backend, profile, pol, ws, root, "", binds, dsk)
	if err != nil {
		unmount()
		return nil, nil, noop, err
	}
	l.volumes = unmount
	if err := objstore.ShiftOwner(ws, old, l.life.owner, idRangeWidth); err != nil {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l.sb.Destroy(dctx)
		cancel()
		unmount()
		return nil, nil, noop, fmt.Errorf("resume sandbox %q: give its files to its host ids: %w", id, err)
	}
	return l, spec, unmount, nil
}

// prepareFiles runs before on a paused sandbox's files, else checks them
// against the manifest its pause recorded ("" after a crash: unchecked).
func (s *Server) prepareFiles(ctx context.Context, id string, d *disk, base objstore.Owner, sum string, before func(*disk, objstore.Owner) error) (bool, error) {
	if before != nil {
		return true, before(d, base)
	}
	if sum == "" {
		return false, nil
	}
	what := fmt.Sprintf("resume sandbox %q", id)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ScanTimeout)
	defer cancel()
	want, err := objstore.ReadManifest(filepath.Join(s.checkpointDir(id, d), "pause.json"), sum, what)
	if err != nil {
		return false, err
	}
	got, err := pausedManifest(ctx, d, base, want.Version)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	if err := objstore.CompareManifests(want, got, what+": its files changed while paused"); err != nil {
		return false, err
	}
	return true, nil
}

// register makes a resumed sandbox live again.
func (s *Server) register(ctx context.Context, l *live, rec *store.Record, lr *store.LifeRow, plan *createPlan, verified bool) (*live, error) {
	now := time.Now().UTC()
	rec.State, rec.Reason, rec.EndedAt, rec.ExpiresAt = store.StateRunning, "", time.Time{}, now.Add(plan.timeout)
	l.mu.Lock()
	l.rec = rec
	l.expires, l.keepAlive = rec.ExpiresAt, rec.KeepAlive
	l.life.autoResume, l.life.keepWhile, l.life.keepIdle, l.life.verified = lr.AutoResume, lr.KeepWhile, lr.KeepIdle, verified
	l.life.publicPorts, l.life.onTimeout, l.life.lease = plan.req.PublicPorts, plan.req.OnTimeout, plan.timeout
	newOwner := l.life.owner
	l.mu.Unlock()
	if err := s.store.MarkResumed(ctx, rec.ID, rec.ExpiresAt, newOwner.UID, newOwner.GID); err != nil {
		s.finishDestroy(ctx, l, nil, "resume failed")
		return nil, err
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.live[rec.ID] = l
		s.mu.Unlock()
		s.shutdownOne(l)
		return nil, fmt.Errorf("resume sandbox %q: server shutting down: %w", rec.ID, sandbox.ErrUnavailable)
	}
	s.live[rec.ID] = l
	s.mu.Unlock()
	s.watch(l)
	s.events.emit(audit.Event{Sandbox: rec.ID, Type: audit.TypeStart, Message: "resumed",
		Fields: map[string]any{"tenant": rec.Tenant, "backend": l.backend, "verified": verified}})
	s.log.Info("sandbox resumed", "sandbox", rec.ID, "verified", verified)
	return l, nil
}

// openDisk reattaches a paused sandbox's files: its volume image, or its
// workspace directory.
func (s *Server) openDisk(id, ws string) (*disk, error) {
	img := filepath.Join(s.cfg.DataDir, "volumes", id+".img")
	if s.cfg.DiskQuota != DiskQuotaVolume {
		if fi, err := os.Lstat(ws); err != nil || !fi.IsDir() {
			return nil, objstore.Corrupt("its workspace %s is gone", ws)
		}
		return &disk{root: ws, workspace: ws}, nil
	}
	if _, err := os.Stat(img); err != nil {
		return nil, objstore.Corrupt("its disk volume %s is gone (was the server's --disk-quota changed?)", filepath.Base(img))
	}
	// A pause whose unmount was lazy is finished only when the kernel let
	// go of the image: never mount it twice.
	if err := volume.WaitFree(img, 30*time.Second); err != nil {
		return nil, err
	}
	root := filepath.Dir(ws)
	v, err := volume.Attach(img, root)
	if err != nil {
		return nil, fmt.Errorf("attach its disk volume: %w", err)
	}
	d := &disk{root: root, workspace: ws, scratch: filepath.Join(root, "scratch"), vol: v}
	if fi, err := os.Lstat(ws); err != nil || !fi.IsDir() {
		v.Close()
		return nil, objstore.Corrupt("its disk volume has no workspace")
	}
	s.mu.Lock()
	s.volumes[d] = struct{}{}
	s.mu.Unlock()
	return d, nil
}

// closeDisk detaches d, keeping its files (a resume that failed).
func (s *Server) closeDisk(d *disk) {
	s.mu.Lock()
	delete(s.volumes, d)
	s.mu.Unlock()
	if d.vol != nil {
		d.files.close()
		d.vol.Close()
	}
}
