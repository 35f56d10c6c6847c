package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
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

// lifeState is what pause, resume, checkpoints and keep-alive-while know
// of a live sandbox. Fields under live.mu, but cp (one checkpoint or
// rollback at a time).
type lifeState struct {
	// pausable: its files are host directories the server keeps (native
	// backend, no image, a workspace on a disk volume or in the data
	// directory): pause, checkpoints and rollback work.
	pausable   bool
	why        string         // why not pausable
	owner      objstore.Owner // host id range base of its files
	autoResume bool
	keepWhile  string        // api.KeepAliveWhileProcesses or ""
	keepIdle   time.Duration // idle time after the last process (0: the server's)
	procSeen   time.Time     // last reap that saw a background process running
	verified   bool          // resumed on files that matched the pause's manifest
	frozen     bool          // its processes are frozen (freeze.go)
	// publicPorts: its ports answer requests without credentials.
	publicPorts bool
	// onTimeout is api.OnTimeoutPause when its timeout freezes it.
	onTimeout string
	lease     time.Duration // its timeout as created: an auto-resume after a pause at timeout runs for it again
	cp        *sync.Mutex
}

// lifeOf decides whether the sandbox l (just made with pol) can be
// paused, and the host ids its files belong to.
func (s *Server) lifeOf(l *live, pol *policy.Policy, root *images.Rootfs, dockerImage string) lifeState {
	ls := lifeState{cp: &sync.Mutex{}}
	switch {
	case l.backend != "native":
		ls.why = fmt.Sprintf("the %s backend keeps no files the server can keep", l.backend)
	case dockerImage != "" || (root != nil && l.disk.layer == ""):
		ls.why = "an image sandbox's writable layer is the backend's (pause keeps workspaces only)"
	case s.cfg.DiskQuota == DiskQuotaVolume && l.disk.vol == nil:
		ls.why = "its workspace is in the run directory (a tmpfs): give it limits.disk so that it gets a disk volume"
	default:
		ls.pausable = true
	}
	if hi, ok := l.sb.(sandbox.HostIdentity); ok {
		uid, gid := hi.HostIDs()
		in, ing, err := pol.Process.Credentials(os.Getuid(), os.Getgid())
		if err == nil {
			ls.owner = objstore.Owner{UID: uid - in, GID: gid - ing}
		}
	}
	return ls
}

// recordLife stores what a pausable sandbox is resumed from.
func (s *Server) recordLife(ctx context.Context, l *live, c caller, req api.CreateSandboxRequest) error {
	l.mu.Lock()
	ls := &l.life
	ls.autoResume = req.AutoResume
	ls.publicPorts, ls.onTimeout, ls.lease = req.PublicPorts, req.OnTimeout, req.Timeout.D()
	if ls.lease == 0 {
		ls.lease = s.cfg.DefaultTimeout
	}
	if req.KeepAliveWhile != nil {
		ls.keepWhile, ls.keepIdle = req.KeepAliveWhile.While, req.KeepAliveWhile.Idle.D()
	}
	row := &store.LifeRow{Trusted: c.trusted, AutoResume: ls.autoResume, KeepWhile: ls.keepWhile, KeepIdle: ls.keepIdle,
		OwnerUID: ls.owner.UID, OwnerGID: ls.owner.GID}
	if l.image != nil {
		row.Image = l.image.Image.ID
	}
	pausable := ls.pausable
	l.mu.Unlock()
	if !pausable {
		return nil
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	row.Request = b
	return s.store.PutLifecycle(ctx, l.sb.ID(), row)
}

// expiredWhile applies keep_alive {while: processes} to a reap: while a
// background process runs the sandbox does not expire; after the last one
// it expires once idle for its idle time, and not before its timeout.
func (ls *lifeState) expiredWhile(expired bool, now time.Time, serverIdle time.Duration, running int) bool {
	if ls.keepWhile != api.KeepAliveWhileProcesses {
		return expired
	}
	if running > 0 {
		ls.procSeen = now
		return false
	}
	idle := ls.keepIdle
	if idle == 0 {
		idle = serverIdle
	}
	return expired && (ls.procSeen.IsZero() || now.Sub(ls.procSeen) > idle)
}

// lookupResuming is lookup that resumes a paused sandbox created with
// auto_resume, after any change of it (change.go).
func (s *Server) lookupResuming(ctx context.Context, tenant, id string) (*live, error) {
	return s.afterChange(ctx, tenant, id, s.lookupResumingNow)
}

// afterChange runs look once no change of tenant's sandbox id is under
// way; a look that fails because one began meanwhile waits for it too.
func (s *Server) afterChange(ctx context.Context, tenant, id string, look func(context.Context, string, string) (*live, error)) (*live, error) {
	for i := 0; ; i++ {
		if err := s.awaitChange(ctx, tenant, id); err != nil {
			return nil, err
		}
		l, err := look(ctx, tenant, id)
		if err == nil || i == 3 || !s.changes.active(id) {
			return l, err
		}
	}
}

// lookupResumingNow is lookupResuming without waiting for a change.
func (s *Server) lookupResumingNow(ctx context.Context, tenant, id string) (*live, error) {
	l, err := s.lookup(tenant, id)
	if fl, ferr := s.lookupAny(tenant, id); err != nil && ferr == nil && fl.isFrozen() {
		if !fl.autoResumes() {
			return nil, err
		}
		return fl, s.thaw(ctx, fl)
	}
	if err == nil || !errors.Is(err, sandbox.ErrNotFound) {
		return l, err
	}
	rec, gerr := s.store.GetSandbox(ctx, tenant, id)
	if gerr != nil || rec.State != store.StatePaused {
		return nil, err
	}
	lr, lerr := s.store.GetLifecycle(ctx, id)
	if lerr != nil || !lr.AutoResume {
		return nil, errPaused(id)
	}
	return s.resume(ctx, tenant, id, nil, nil)
}

// errPaused answers a request a paused sandbox cannot serve: 409, the
// sandbox exists (it is not 404) but must be resumed first.
func errPaused(id string) error {
	return &httpError{api.CodeConflict, fmt.Errorf("sandbox %q is paused; resume it (POST /v1/sandboxes/%s/resume, or create it with auto_resume): %w", id, id, sandbox.ErrClosed)}
}

// lookupLive is lookup that tells a paused sandbox (409) from none (404),
// for requests that never resume one (process listings, port routes),
// after any change of it (change.go).
func (s *Server) lookupLive(ctx context.Context, tenant, id string) (*live, error) {
	return s.afterChange(ctx, tenant, id, s.lookupLiveNow)
}

// lookupLiveNow is lookupLive without waiting for a change.
func (s *Server) lookupLiveNow(ctx context.Context, tenant, id string) (*live, error) {
	l, err := s.lookup(tenant, id)
	if err != nil && errors.Is(err, sandbox.ErrNotFound) {
		if rec, gerr := s.store.GetSandbox(ctx, tenant, id); gerr == nil && rec.State == store.StatePaused {
			return nil, errPaused(id)
		}
	}
	return l, err
}

// checkpointDir is where sandbox id keeps its checkpoints and its pause
// manifest: on its volume (counted in its disk quota), else in the data
// directory.
func (s *Server) checkpointDir(id string, d *disk) string {
	if d != nil && d.vol != nil {
		return filepath.Join(d.root, "checkpoints")
	}
	return filepath.Join(s.cfg.DataDir, "checkpoints", id)
}

// pausedFiles lists the files reconcile keeps: paused sandboxes'.
func (s *Server) pausedFiles(ctx context.Context) map[string]bool {
	keep := map[string]bool{}
	paused, err := s.store.ListPaused(ctx)
	if err != nil {
		s.log.Error("reconcile: paused sandboxes", "err", err)
	}
	var ids []string
	for _, p := range paused {
		keep[p.ID], keep[p.ID+".img"] = true, true
		ids = append(ids, p.ID)
		s.holdPaused(p.Tenant, p.ID, hold{memory: p.Memory, disk: s.pausedDisk(p.ID)})
	}
	s.holdPausedImages(ctx, ids)
	return keep
}

// expirePaused destroys the sandboxes paused longer than the paused
// retention (serve --paused-retention): what a tenant paused is not kept
// forever.
func (s *Server) expirePaused(now time.Time) {
	if s.cfg.PausedRetention < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	paused, err := s.store.ListPaused(ctx)
	if err != nil {
		s.log.Error("expire paused sandboxes", "err", err)
		return
	}
	for _, p := range paused {
		if now.Sub(p.PausedAt) <= s.cfg.PausedRetention {
			continue
		}
		rec, err := s.store.GetSandbox(ctx, p.Tenant, p.ID)
		if err != nil || rec.State != store.StatePaused {
			continue
		}
		why := fmt.Sprintf("expired: paused longer than the server's paused retention (%s)", s.cfg.PausedRetention)
		if err := s.destroyPaused(ctx, rec, why); err != nil {
			s.log.Error("expire paused sandbox", "sandbox", p.ID, "err", err)
			continue
		}
		s.log.Info("paused sandbox expired", "sandbox", p.ID, "retention", s.cfg.PausedRetention)
	}
}

// removeAllBut removes the entries of dir not named in keep.
func removeAllBut(dir string, keep map[string]bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if !keep[e.Name()] {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// shutdownOne pauses a keep-alive sandbox that can be paused, else
// destroys it: a server's clean shutdown (an upgrade) keeps what was
// meant to live.
func (s *Server) shutdownOne(l *live) {
	l.mu.Lock()
	keep := l.rec != nil && l.life.pausable && (l.keepAlive || l.life.keepWhile != "")
	l.mu.Unlock()
	if keep {
		if err := s.pause(l, "server shutdown"); err == nil {
			return
		}
	}
	s.destroy(l, "server shutdown")
}

// pause stops l's processes and keeps its files, recording a manifest of
// its workspace that resume checks. On failure before the processes are
// gone the sandbox still runs.
func (s *Server) pause(l *live, reason string) error {
	_, err := s.stop(l, reason, false)
	return err
}

// stop is pause; with mounted it leaves the files attached and returns
// them, for a resume in this process that replaces them (a rollback): no
// manifest, no unmount.
func (s *Server) stop(l *live, reason string, mounted bool) (*disk, error) {
	id := l.sb.ID()
	what := "paused"
	if mounted {
		what = changeRollback
	}
	// Before it is marked closing: a request that finds it closing finds
	// the change too, and waits for it.
	defer s.changes.begin(id, what)()
	l.mu.Lock()
	if !l.life.pausable {
		l.mu.Unlock()
		return nil, fmt.Errorf("pause sandbox %q: %s: %w", id, l.life.why, sandbox.ErrNotSupported)
	}
	if l.closing {
		l.mu.Unlock()
		return nil, &httpError{api.CodeConflict, fmt.Errorf("pause sandbox %q: being destroyed or paused: %w", id, sandbox.ErrClosed)}
	}
	l.closing = true
	l.changedBy = what
	rec, base := l.rec, l.life.owner
	l.mu.Unlock()
	defer close(l.gone)
	s.thawForEnd(l)
	l.killProcs()
	// Each step gets a bound of its own: a long one (the manifest of a
	// big workspace) must not leave the next without time, which once
	// left a sandbox gone but recorded running.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := l.sb.Destroy(ctx)
	cancel()
	if err != nil {
		// Processes may be left: the files are no one's to keep.
		s.log.Error("pause sandbox: destroy", "sandbox", id, "err", err)
		return nil, s.pauseFailed(l, rec, err)
	}
	if l.volumes != nil {
		l.volumes() // a paused sandbox holds no named volume: resume mounts them again
	}
	var sum string
	if !mounted {
		if sum, err = s.detachPaused(id, l.disk, base); err != nil {
			s.log.Error("pause sandbox: keep files", "sandbox", id, "err", err)
			return nil, s.pauseFailed(l, rec, err)
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.store.MarkPaused(ctx, id, reason, sum, time.Now()); err != nil {
		s.log.Error("pause sandbox: record", "sandbox", id, "err", err)
		return nil, s.pauseFailed(l, rec, err)
	}
	if !mounted {
		s.mu.Lock()
		delete(s.volumes, l.disk)
		s.mu.Unlock()
	}
	s.held.put(id, l.image) // a paused sandbox's image stays in the store
	s.events.emit(audit.Event{Sandbox: id, Type: audit.TypeDestroy, Message: "paused: " + reason, Fields: map[string]any{"paused": true}})
	s.unregister(l, rec, true)
	s.log.Info("sandbox paused", "sandbox", id, "reason", reason)
	return l.disk, nil
}

// detachPaused records the manifest of a stopped sandbox's files and
// detaches its volume. The order is what lets a resume that follows at
// once mount the image again: the server's own files on the volume
// (spools, spilled output of requests of the ended processes) are closed
// first, or the unmount could only be lazy and the image stay held for
// as long as their clients take; then the volume is synced, unmounted
// and waited for until no mount of it is left anywhere. A volume still
// held after that (a copy of its mount in another process's mount
// namespace) has its data on the image: the sandbox is paused all the
// same, and its resume waits for the holder (volume.ErrHeld, logged
// with who holds it).
func (s *Server) detachPaused(id string, d *disk, base objstore.Owner) (string, error) {
	if d.vol != nil {
		d.files.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ScanTimeout)
	sum, err := s.recordPause(ctx, id, d, base)
	cancel()
	if err != nil || d.vol == nil {
		return sum, err
	}
	err = d.vol.Close() // the image stays in the data directory
	if errors.Is(err, volume.ErrHeld) {
		s.log.Warn("pause sandbox: its volume is still held elsewhere; its data is on the image, its resume waits for the holder", "sandbox", id, "err", err)
		err = nil
	}
	return sum, err
}

// pauseFailed ends l, whose processes are gone (or may be), as stopped
// with its files removed: the record says what is true, nothing is left.
func (s *Server) pauseFailed(l *live, rec *store.Record, cause error) error {
	l.mu.Lock()
	l.changedBy = "" // ended, not paused: its requests' errors say so
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.finishDestroy(ctx, l, rec, fmt.Sprintf("pause failed (%v): ended", cause)); err != nil {
		s.log.Error("pause sandbox: end after a failed pause", "sandbox", l.sb.ID(), "err", err)
	}
	return fmt.Errorf("pause sandbox %q: %w (the sandbox was ended)", l.sb.ID(), cause)
}

// recordPause writes the manifest of a stopped sandbox's workspace and
// returns its sha256.
func (s *Server) recordPause(ctx context.Context, id string, d *disk, base objstore.Owner) (string, error) {
	m, err := pausedManifest(ctx, d, base, objstore.Version)
	if err != nil {
		return "", err
	}
	dir := s.checkpointDir(id, d)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return objstore.WriteManifest(filepath.Join(dir, "pause.json"), m)
}

// finishDestroy is destroy's end for a sandbox whose processes are gone.
func (s *Server) finishDestroy(ctx context.Context, l *live, rec *store.Record, reason string) error {
	id := l.sb.ID()
	l.image.Release()
	err := s.releaseDisk(l.disk)
	if ferr := s.forgetLife(ctx, id); err == nil {
		err = ferr
	}
	s.events.emit(audit.Event{Sandbox: id, Type: audit.TypeDestroy, Message: reason})
	s.unregister(l, rec, false)
	if serr := s.store.MarkStopped(ctx, id, reason, time.Now()); err == nil {
		err = serr
	}
	return err
}

// forgetLife removes sandbox id's checkpoints (outside its volume) and
// their rows: it is destroyed.
func (s *Server) forgetLife(ctx context.Context, id string) error {
	err := os.RemoveAll(filepath.Join(s.cfg.DataDir, "checkpoints", id))
	if serr := s.store.ForgetLifecycle(ctx, id); err == nil {
		err = serr
	}
	return err
}

// destroyPaused removes a paused sandbox's files and marks it stopped.
func (s *Server) destroyPaused(ctx context.Context, rec *store.Record, reason string) error {
	defer s.resumes.lock(rec.ID)()
	if now, err := s.store.GetSandbox(ctx, rec.Tenant, rec.ID); err != nil || now.State != store.StatePaused {
		return &httpError{api.CodeConflict, fmt.Errorf("destroy paused sandbox %q: no longer paused: %w", rec.ID, sandbox.ErrClosed)}
	}
	errs := []error{
		os.Remove(filepath.Join(s.cfg.DataDir, "volumes", rec.ID+".img")),
		os.RemoveAll(filepath.Join(s.cfg.RunDir, "volumes", rec.ID)),
		os.RemoveAll(filepath.Join(s.cfg.DataDir, "workspaces", rec.ID)),
		(&disk{layer: filepath.Join(s.cfg.DataDir, "layers", rec.ID)}).removeLayer(),
		s.forgetLife(ctx, rec.ID),
	}
	s.held.take(rec.ID).Release()
	s.dropPaused(rec.Tenant, rec.ID)
	if errors.Is(errs[0], fs.ErrNotExist) {
		errs[0] = nil
	}
	s.events.emit(audit.Event{Sandbox: rec.ID, Type: audit.TypeDestroy, Message: reason})
	errs = append(errs, s.store.MarkStopped(ctx, rec.ID, reason, time.Now()))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("destroy paused sandbox %q: %w", rec.ID, err)
	}
	return nil
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	id := r.PathValue("id")
	var req api.PauseRequest
	if r.ContentLength != 0 && !s.decodeBody(w, r, &req) {
		return
	}
	if err := s.awaitChange(r.Context(), c.tenant, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := s.lookupAny(c.tenant, id)
	if err == nil && req.Memory {
		s.handleFreeze(w, r, l)
		return
	}
	if err != nil {
		// Pausing a paused sandbox is a no-op.
		if rec, gerr := s.store.GetSandbox(r.Context(), c.tenant, id); gerr == nil && rec.State == store.StatePaused {
			writeJSON(w, http.StatusOK, s.view(nil, rec, false))
			return
		}
		s.writeError(w, r, err)
		return
	}
	if err := s.pause(l, "paused through the API"); err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.store.GetSandbox(r.Context(), c.tenant, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(nil, rec, false))
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	l, err := s.resume(r.Context(), c.tenant, r.PathValue("id"), nil, nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	writeJSON(w, http.StatusOK, s.view(l, rec, false))
}
