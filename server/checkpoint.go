package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/objstore"
)

// CheckpointQuota bounds one tenant's checkpoints.
type CheckpointQuota struct {
	Count int
	Bytes int64 // the recorded workspaces' sizes together
}

func (s *Server) objects(id string, d *disk) *objstore.Store {
	return objstore.New(filepath.Join(s.checkpointDir(id, d), "objects"))
}

func (s *Server) handleCheckpointCreate(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.CheckpointRequest
	if r.ContentLength != 0 && !s.decodeBody(w, r, &req) {
		return
	}
	if len(req.Name) > 128 {
		s.writeError(w, r, errBadRequest("checkpoint name: at most 128 bytes"))
		return
	}
	cp, err := s.checkpoint(r.Context(), l, req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, cp)
}

// checkpoint records l's workspace: a manifest, and the content no
// earlier checkpoint of l stored. Its processes are frozen while the
// files are read, where the backend can (one point in time); else a file
// written meanwhile is recorded as it was read, once.
func (s *Server) checkpoint(ctx context.Context, l *live, name string) (api.Checkpoint, error) {
	id := l.sb.ID()
	l.mu.Lock()
	ls, tenant := l.life, l.rec.Tenant
	l.mu.Unlock()
	if !ls.pausable {
		return api.Checkpoint{}, fmt.Errorf("checkpoint sandbox %q: %s: %w", id, ls.why, sandbox.ErrNotSupported)
	}
	ls.cp.Lock()
	defer ls.cp.Unlock()
	// One scan at a time per tenant: a tenant's checkpoints queue behind
	// each other, never another tenant's.
	unlock := s.scans.lock(tenant)
	defer unlock()
	q := s.cfg.CheckpointQuota
	n, used, err := s.store.CheckpointUsage(ctx, tenant)
	if err != nil {
		return api.Checkpoint{}, err
	}
	if n >= q.Count {
		return api.Checkpoint{}, fmt.Errorf("checkpoint sandbox %q: tenant %q has %d of %d checkpoints (delete some): %w", id, tenant, n, q.Count, sandbox.ErrLimit)
	}
	if used >= q.Bytes {
		return api.Checkpoint{}, fmt.Errorf("checkpoint sandbox %q: tenant %q holds %d of %d checkpoint bytes: %w", id, tenant, used, q.Bytes, sandbox.ErrLimit)
	}
	// Bounded as it reads: by the client (ctx), the server's deadline and
	// the quota's bytes left.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ScanTimeout)
	defer cancel()
	sc := objstore.NewLimitedScan(ctx, fmt.Sprintf("checkpoint sandbox %q", id), q.Bytes-used)
	thaw := s.holdStill(ctx, l)
	m, newBytes, skipped, err := objstore.ScanTree(l.workspace, ls.owner, s.objects(id, l.disk), sc)
	thaw()
	if err != nil {
		s.sweepObjects(context.WithoutCancel(ctx), id, l.disk)
		return api.Checkpoint{}, fmt.Errorf("checkpoint sandbox %q: %w", id, err)
	}
	cp := api.Checkpoint{ID: newID("cp-"), Sandbox: id, Name: name, CreatedAt: time.Now().UTC(), Files: len(m.Entries), NewBytes: newBytes, Skipped: skipped, Bytes: sc.Data()}
	ctx = context.WithoutCancel(ctx) // what follows is quick and must finish
	manifestPath := filepath.Join(s.checkpointDir(id, l.disk), cp.ID+".json")
	if err = os.MkdirAll(filepath.Dir(manifestPath), 0o700); err == nil {
		cp.Manifest, err = objstore.WriteManifest(manifestPath, m)
	}
	if err == nil {
		err = s.store.InsertCheckpoint(ctx, tenant, cp)
	}
	if err != nil {
		os.Remove(manifestPath)
		s.sweepObjects(ctx, id, l.disk)
		return api.Checkpoint{}, fmt.Errorf("checkpoint sandbox %q: %w", id, err)
	}
	s.events.emit(audit.Event{Sandbox: id, Type: audit.TypeFile, Message: "checkpoint recorded",
		Fields: map[string]any{"checkpoint": cp.ID, "files": cp.Files, "bytes": cp.Bytes, "new_bytes": cp.NewBytes}})
	return cp, nil
}

// sweepObjects removes the content no checkpoint of sandbox id holds.
func (s *Server) sweepObjects(ctx context.Context, id string, d *disk) {
	cps, err := s.store.ListCheckpoints(ctx, id)
	if err != nil {
		return
	}
	var keep []*objstore.Manifest
	for _, c := range cps {
		m, err := objstore.ReadManifest(filepath.Join(s.checkpointDir(id, d), c.ID+".json"), c.Manifest, "sweep")
		if err != nil {
			return // keep everything rather than lose what a readable one needs
		}
		keep = append(keep, m)
	}
	if err := s.objects(id, d).Sweep(keep); err != nil {
		s.log.Warn("sweep checkpoint content", "sandbox", id, "err", err)
	}
}

func (s *Server) handleCheckpointList(w http.ResponseWriter, r *http.Request) {
	rec := s.stored(w, r)
	if rec == nil {
		return
	}
	cps, err := s.store.ListCheckpoints(r.Context(), rec.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.CheckpointList{Checkpoints: cps})
}

func (s *Server) handleCheckpointDelete(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	id, cp := l.sb.ID(), r.PathValue("checkpoint")
	l.life.cp.Lock()
	defer l.life.cp.Unlock()
	if err := s.store.DeleteCheckpoint(r.Context(), id, cp); err != nil {
		s.writeError(w, r, err)
		return
	}
	os.Remove(filepath.Join(s.checkpointDir(id, l.disk), filepath.Base(cp)+".json"))
	s.sweepObjects(r.Context(), id, l.disk)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRollback(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	var req api.RollbackRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.Checkpoint == "" {
		s.writeError(w, r, errBadRequest("rollback: checkpoint: required"))
		return
	}
	l, err := s.lookupResuming(r.Context(), c.tenant, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	nl, err := s.rollback(r.Context(), l, req.Checkpoint)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	nl.mu.Lock()
	rec := nl.rec
	nl.mu.Unlock()
	writeJSON(w, http.StatusOK, s.view(nl, rec, false))
}

// rollback restores l's workspace to checkpoint cp in place: the
// checkpoint is verified while l still runs (a bad one leaves it as it
// was), then l is paused, its workspace replaced and l resumed (same ID).
func (s *Server) rollback(ctx context.Context, l *live, cpID string) (*live, error) {
	id := l.sb.ID()
	l.mu.Lock()
	ls, tenant := l.life, l.rec.Tenant
	l.mu.Unlock()
	if !ls.pausable {
		return nil, fmt.Errorf("rollback sandbox %q: %s: %w", id, ls.why, sandbox.ErrNotSupported)
	}
	ls.cp.Lock()
	defer ls.cp.Unlock()
	cp, err := s.store.GetCheckpoint(ctx, id, cpID)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("rollback sandbox %q to checkpoint %s", id, cp.ID)
	m, err := objstore.ReadManifest(filepath.Join(s.checkpointDir(id, l.disk), cp.ID+".json"), cp.Manifest, what)
	if err != nil {
		return nil, err
	}
	vctx, cancel := context.WithTimeout(ctx, s.cfg.ScanTimeout)
	defer cancel()
	if err := s.objects(id, l.disk).Verify(vctx, m, what); err != nil {
		return nil, err
	}
	// From the pause to the resume the sandbox is changing: requests wait
	// for it (change.go), and no other resume or delete of its paused
	// files comes between (s.resumes).
	defer s.changes.begin(id, changeRollback)()
	defer s.resumes.lock(id)()
	// The files stay attached: nothing but this server touches them
	// before the restore, which trusts the objects verified above.
	dsk, err := s.stop(l, "rollback to checkpoint "+cp.ID, true)
	if err != nil {
		return nil, err
	}
	return s.resumeLocked(ctx, tenant, id, func(d *disk, base objstore.Owner) error {
		return replaceTree(ctx, m, s.objects(id, d), d.workspace, base)
	}, dsk)
}

// replaceTree makes ws the tree of m: restored next to it, then swapped.
func replaceTree(ctx context.Context, m *objstore.Manifest, objs *objstore.Store, ws string, base objstore.Owner) error {
	fresh, old := ws+".rollback", ws+".old"
	os.RemoveAll(fresh)
	os.RemoveAll(old)
	if err := objstore.RestoreTree(ctx, m, objs, fresh, base); err != nil {
		os.RemoveAll(fresh)
		return fmt.Errorf("restore: %w", err)
	}
	if err := os.Chmod(fresh, 0o755); err != nil {
		os.RemoveAll(fresh)
		return err
	}
	if err := os.Rename(ws, old); err != nil {
		os.RemoveAll(fresh)
		return err
	}
	if err := os.Rename(fresh, ws); err != nil {
		os.Rename(old, ws)
		return err
	}
	return os.RemoveAll(old)
}
