package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/objstore"
	"github.com/airlock-dev/airlock/server/store"
)

// snapshotDir is where snapshot id keeps its files: workspace/ and, for
// an image sandbox's, upper/ (its writable layer's upper directory).
func (s *Server) snapshotDir(id string) string {
	return filepath.Join(s.cfg.DataDir, "snapshots", id)
}

// snapshot copies l's files and settings into a new snapshot of its
// tenant, counted against the tenant's checkpoint quota. On error
// nothing is left.
func (s *Server) snapshot(ctx context.Context, l *live, name string) (*store.SnapRow, error) {
	what := fmt.Sprintf("snapshot sandbox %q", l.sb.ID())
	src, err := s.forkSource(ctx, l, what)
	if err != nil {
		return nil, err
	}
	q := s.cfg.CheckpointQuota
	n, used, err := s.store.CheckpointUsage(ctx, src.tenant)
	if err != nil {
		return nil, err
	}
	if n >= q.Count {
		return nil, fmt.Errorf("%s: tenant %q has %d of %d checkpoints and snapshots (delete some): %w", what, src.tenant, n, q.Count, sandbox.ErrLimit)
	}
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	row := &store.SnapRow{Snapshot: api.Snapshot{ID: newID("snap-"), Name: name, Sandbox: rec.ID, Backend: rec.Backend, Image: rec.Image,
		CreatedAt: time.Now().UTC()}, Tenant: src.tenant, ImageID: src.imageID, Trusted: src.trusted, OwnerUID: src.owner.UID, OwnerGID: src.owner.GID}
	if row.Request, err = json.Marshal(src.req); err != nil {
		return nil, err
	}
	// The copy may take what the tenant's disk quota has left, at most
	// what the source's volume holds; the reservation ends once the row
	// counts it (or the copy is undone).
	budget, unreserve, err := s.reserveDisk(ctx, src.tenant, l.diskUse, false, what)
	if err != nil {
		return nil, err
	}
	defer unreserve()
	dir := s.snapshotDir(row.ID)
	fail := func(err error) (*store.SnapRow, error) {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	start := time.Now()
	st, err := s.fillSnapshot(src, dir, max(budget, 0))
	if err != nil {
		return fail(err)
	}
	row.Files, row.Bytes, row.Disk = st.Files, st.Bytes, st.Stored
	row.Copy = api.CopyReport{Method: st.method(), Files: st.Files, Bytes: st.Bytes, Skipped: st.Skipped, Millis: time.Since(start).Milliseconds()}
	if used+row.Bytes > q.Bytes {
		return fail(fmt.Errorf("tenant %q would hold %d of %d checkpoint and snapshot bytes: %w", src.tenant, used+row.Bytes, q.Bytes, sandbox.ErrLimit))
	}
	var lease *images.Rootfs
	if row.ImageID != "" {
		// The snapshot holds its image: the store keeps it while it lives.
		if lease, err = s.cfg.Images.Acquire(ctx, row.ImageID, row.ID, images.AcquireOptions{}); err != nil {
			return fail(err)
		}
	}
	if err := s.store.InsertSnapshot(ctx, row); err != nil {
		lease.Release()
		return fail(err)
	}
	s.held.put(row.ID, lease)
	s.events.emit(audit.Event{Sandbox: rec.ID, Type: audit.TypeFile, Message: "snapshot taken",
		Fields: map[string]any{"snapshot": row.ID, "files": row.Files, "bytes": row.Bytes, "method": row.Copy.Method}})
	return row, nil
}

// fillSnapshot copies src's files into the new directory dir, their
// blocks within limit bytes (0: no limit).
func (s *Server) fillSnapshot(src *cloneSource, dir string, limit int64) (cloneStats, error) {
	var st cloneStats
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return st, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return st, err
	}
	for _, sub := range []string{"workspace", "upper"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return st, err
		}
	}
	let := src.still()
	defer let()
	st, err := cloneTreeWithin(src.ws, filepath.Join(dir, "workspace"), limit)
	if err == nil && src.upper != "" {
		left := limit - st.Stored
		if limit == 0 {
			left = 0
		} else if left <= 0 {
			left = -1 // nothing left: any block refuses
		}
		var up cloneStats
		up, err = cloneTreeWithin(src.upper, filepath.Join(dir, "upper"), left)
		st.add(up)
	}
	return st, err
}

// snapshotSource is snapshot ref of tenant as a cloneSource.
func (s *Server) snapshotSource(ctx context.Context, tenant, ref string) (*cloneSource, error) {
	row, err := s.store.GetSnapshot(ctx, tenant, ref)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("create from snapshot %q", row.ID)
	src := &cloneSource{what: what, tenant: tenant, trusted: row.Trusted, imageID: row.ImageID,
		owner: objstore.Owner{UID: row.OwnerUID, GID: row.OwnerGID}, ws: filepath.Join(s.snapshotDir(row.ID), "workspace")}
	if err := json.Unmarshal(row.Request, &src.req); err != nil {
		return nil, fmt.Errorf("%s: stored request: %w", what, err)
	}
	if row.ImageID != "" {
		src.upper = filepath.Join(s.snapshotDir(row.ID), "upper")
	}
	// Nothing writes a snapshot's files; a delete waits for the copy.
	src.still = func() func() {
		s.snapMu.RLock()
		return s.snapMu.RUnlock
	}
	return src, nil
}

// deleteSnapshot removes tenant's snapshot ref, its files and its image
// lease.
func (s *Server) deleteSnapshot(ctx context.Context, tenant, ref string) error {
	row, err := s.store.GetSnapshot(ctx, tenant, ref)
	if err != nil {
		return err
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if err := s.store.DeleteSnapshot(ctx, tenant, row.ID); err != nil {
		return err
	}
	s.held.take(row.ID).Release()
	if err := os.RemoveAll(s.snapshotDir(row.ID)); err != nil {
		return fmt.Errorf("delete snapshot %q: %w", row.ID, err)
	}
	return nil
}

// keepSnapshots removes the snapshot directories no stored snapshot owns
// (a server that died while taking one) and holds the images of those
// that are stored.
func (s *Server) keepSnapshots(ctx context.Context) error {
	rows, err := s.store.AllSnapshots(ctx)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, r := range rows {
		keep[r.ID] = true
		if r.ImageID == "" || s.cfg.Images == nil {
			continue
		}
		lease, err := s.cfg.Images.Acquire(ctx, r.ImageID, r.ID, images.AcquireOptions{})
		if err != nil {
			s.log.Error("reconcile: hold the image of a snapshot", "snapshot", r.ID, "image", r.ImageID, "err", err)
			continue
		}
		s.held.put(r.ID, lease)
	}
	return removeAllBut(filepath.Join(s.cfg.DataDir, "snapshots"), keep)
}

func (s *Server) handleSnapshotCreate(w http.ResponseWriter, r *http.Request) {
	l, release := s.acquire(w, r)
	if l == nil {
		return
	}
	defer release()
	var req api.SnapshotRequest
	if r.ContentLength != 0 && !s.decodeBody(w, r, &req) {
		return
	}
	if len(req.Name) > 128 {
		s.writeError(w, r, errBadRequest("snapshot name: at most 128 bytes"))
		return
	}
	row, err := s.snapshot(r.Context(), l, req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, row.Snapshot)
}

func (s *Server) handleSnapshotList(w http.ResponseWriter, r *http.Request) {
	rows, err := s.store.ListSnapshots(r.Context(), callerOf(r).tenant, r.URL.Query().Get("sandbox"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.SnapshotList{Snapshots: []api.Snapshot{}}
	for _, row := range rows {
		out.Snapshots = append(out.Snapshots, row.Snapshot)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleSnapshotGet(w http.ResponseWriter, r *http.Request) {
	row, err := s.store.GetSnapshot(r.Context(), callerOf(r).tenant, r.PathValue("snapshot"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, row.Snapshot)
}

func (s *Server) handleSnapshotDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.deleteSnapshot(r.Context(), callerOf(r).tenant, r.PathValue("snapshot")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleSnapshotSandboxes(w http.ResponseWriter, r *http.Request) {
	var req api.ForkRequest
	if r.ContentLength != 0 && !s.decodeBody(w, r, &req) {
		return
	}
	src, err := s.snapshotSource(r.Context(), callerOf(r).tenant, r.PathValue("snapshot"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cloneMany(r.Context(), src, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}
