package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/internal/volume"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/admission"
	"github.com/airlock-dev/airlock/server/store"
)

// Named volumes are a tenant's persistent disks: an ext4 image each
// (internal/volume, so its size is its quota), DataDir/named-volumes/ID.img,
// a row in the store, mounted (once, however many sandboxes use it) below
// RunDir/named-mounts/ID while a sandbox uses it, its data/ directory
// bound where the create request asks. They outlive sandboxes and the
// server; a volume in use cannot be deleted.

// Bounds of named volumes.
const (
	defaultVolumeQuota = 16 << 30 // bytes of volumes one tenant may have
	maxVolumes         = 64       // volumes one tenant may have
	maxVolumeMounts    = 8        // volumes one sandbox may mount
	volumeDataDir      = "data"   // the directory of an image sandboxes see
)

var volumeNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`) })

func checkVolumeName(n string) error {
	if !volumeNameRE().MatchString(n) {
		return errBadRequest("volume name %q: want 1..63 of a-z 0-9 _ . - (starting with a letter or digit)", n)
	}
	return nil
}

// namedVolumes are the volumes mounted for live sandboxes.
type namedVolumes struct {
	mu      sync.Mutex // also serializes creates and deletes
	mounted map[string]*volMount
}

type volMount struct {
	vol   *volume.Volume
	users map[string]bool // sandbox IDs
}

func (s *Server) volumeImage(id string) string {
	return filepath.Join(s.cfg.DataDir, "named-volumes", id+".img")
}

func (s *Server) volumeMountDir(id string) string {
	return filepath.Join(s.cfg.RunDir, "named-mounts", id)
}

// sweepNamedVolumes unmounts what a previous server left mounted and
// removes images without a row (a create a crash interrupted).
func (s *Server) sweepNamedVolumes(ctx context.Context) error {
	mounts := filepath.Join(s.cfg.RunDir, "named-mounts")
	var errs []error
	if err := volume.Sweep(mounts); err != nil {
		errs = append(errs, fmt.Errorf("reconcile: unmount named volumes: %w", err))
	}
	os.RemoveAll(mounts)
	for _, d := range []string{mounts, filepath.Join(s.cfg.DataDir, "named-volumes")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			errs = append(errs, fmt.Errorf("reconcile: %s: %w", d, err))
		}
	}
	keep, err := s.store.VolumeIDs(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	imgs, _ := filepath.Glob(filepath.Join(s.cfg.DataDir, "named-volumes", "*.img"))
	for _, img := range imgs {
		if !keep[strings.TrimSuffix(filepath.Base(img), ".img")] {
			os.Remove(img)
		}
	}
	return errors.Join(errs...)
}

func (s *Server) volumeQuota() int64 {
	if s.cfg.VolumeQuota > 0 {
		return s.cfg.VolumeQuota
	}
	return defaultVolumeQuota
}

func (s *Server) handleVolumeCreate(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	var req api.CreateVolumeRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	v, err := s.createVolume(r.Context(), c.tenant, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("volume created", "tenant", c.tenant, "volume", v.Name, "size", v.Size)
	writeJSON(w, http.StatusCreated, s.volumeView(v))
}

func (s *Server) createVolume(ctx context.Context, tenant string, req api.CreateVolumeRequest) (*store.VolumeRecord, error) {
	if err := checkVolumeName(req.Name); err != nil {
		return nil, err
	}
	if s.cfg.DiskQuota != DiskQuotaVolume {
		return nil, fmt.Errorf("create volume %q: named volumes are quota-limited disk images: this server runs without them (airlock serve --disk-quota volume, as root with mkfs.ext4): %w", req.Name, sandbox.ErrNotSupported)
	}
	quota := s.volumeQuota()
	if req.SizeBytes < volume.MinSize || req.SizeBytes > quota {
		return nil, errBadRequest("create volume %q: size_bytes %d: want %d..%d", req.Name, req.SizeBytes, int64(volume.MinSize), quota)
	}
	s.nvols.mu.Lock()
	defer s.nvols.mu.Unlock()
	have, err := s.store.ListVolumes(ctx, tenant)
	if err != nil {
		return nil, err
	}
	total := req.SizeBytes
	for _, v := range have {
		total += v.Size
	}
	if len(have) >= maxVolumes || total > quota {
		return nil, fmt.Errorf("create volume %q: tenant %q has %d volumes; with this one %d bytes, more than its %d volumes or %d bytes: %w",
			req.Name, tenant, len(have), total, maxVolumes, quota, sandbox.ErrLimit)
	}
	if err := s.checkDiskCommit(req.SizeBytes); err != nil {
		return nil, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	// Its size counts against the tenant's disk quota, from the store once
	// its row is there.
	_, unreserve, err := s.reserveDisk(ctx, tenant, req.SizeBytes, true, fmt.Sprintf("create volume %q", req.Name))
	if err != nil {
		return nil, err
	}
	defer unreserve()
	rec := &store.VolumeRecord{ID: newID("vol-"), Tenant: tenant, Name: req.Name, Size: req.SizeBytes, CreatedAt: time.Now().UTC()}
	img, dir := s.volumeImage(rec.ID), s.volumeMountDir(rec.ID)
	vol, err := volume.Create(ctx, img, dir, rec.Size, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	// Root's, searchable by every sandbox's host ids; data/ is where the
	// sandboxes write, sticky like /tmp (see RATIONALE).
	err = os.Chmod(dir, 0o711)
	if err == nil {
		err = os.Mkdir(filepath.Join(dir, volumeDataDir), 0o777)
	}
	if err == nil {
		err = os.Chmod(filepath.Join(dir, volumeDataDir), 0o777|os.ModeSticky)
	}
	err = errors.Join(err, vol.Close())
	os.Remove(dir)
	if err == nil {
		err = s.store.InsertVolume(ctx, rec)
	}
	if err != nil {
		os.Remove(img)
		return nil, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	return rec, nil
}

// volumeView renders v with the sandboxes using it.
func (s *Server) volumeView(v *store.VolumeRecord) api.Volume {
	out := api.Volume{Name: v.Name, SizeBytes: v.Size, CreatedAt: v.CreatedAt}
	s.nvols.mu.Lock()
	if m := s.nvols.mounted[v.ID]; m != nil {
		for id := range m.users {
			out.InUse = append(out.InUse, id)
		}
	}
	s.nvols.mu.Unlock()
	sort.Strings(out.InUse)
	return out
}

func (s *Server) handleVolumeList(w http.ResponseWriter, r *http.Request) {
	vs, err := s.store.ListVolumes(r.Context(), callerOf(r).tenant)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.VolumeList{Volumes: []api.Volume{}}
	for i := range vs {
		out.Volumes = append(out.Volumes, s.volumeView(&vs[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleVolumeGet(w http.ResponseWriter, r *http.Request) {
	v, err := s.store.GetVolume(r.Context(), callerOf(r).tenant, r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.volumeView(v))
}

func (s *Server) handleVolumeDelete(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	name := r.PathValue("name")
	s.nvols.mu.Lock()
	defer s.nvols.mu.Unlock()
	v, err := s.store.GetVolume(r.Context(), c.tenant, name)
	if err == nil {
		if m := s.nvols.mounted[v.ID]; m != nil {
			err = fmt.Errorf("delete volume %q: in use by %d sandbox(es): %w", name, len(m.users), sandbox.ErrExists)
		}
	}
	if err == nil {
		err = s.store.DeleteVolume(r.Context(), v.ID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if rerr := os.Remove(s.volumeImage(v.ID)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		s.log.Error("delete volume image", "volume", name, "err", rerr)
	}
	s.log.Info("volume deleted", "tenant", c.tenant, "volume", name)
	w.WriteHeader(http.StatusNoContent)
}

// checkVolumeMounts checks a create request's volumes against the
// sandbox's resolved policy: names, mount points (the workspace's rules,
// clean, not over the workspace or one another), backend.
func checkVolumeMounts(reqs []api.VolumeMount, backend string, pol *policy.Policy, ceil *admission.Ceiling, tenant string) error {
	if len(reqs) == 0 {
		return nil
	}
	if backend != "native" {
		return fmt.Errorf("create sandbox: volumes: backend %s cannot mount named volumes (native can): %w", backend, sandbox.ErrInvalid)
	}
	if len(reqs) > maxVolumeMounts {
		return errBadRequest("create sandbox: volumes: %d, at most %d", len(reqs), maxVolumeMounts)
	}
	taken := []string{}
	if ws := pol.Filesystem.WorkspaceInside(); pol.Filesystem.WorkspacePath() != "" && ws != "" {
		taken = append(taken, ws)
	}
	names := map[string]bool{}
	for i, m := range reqs {
		if err := checkVolumeName(m.Name); err != nil {
			return fmt.Errorf("create sandbox: volumes[%d]: %w", i, err)
		}
		if names[m.Name] {
			return errBadRequest("create sandbox: volumes[%d]: volume %q mounted twice", i, m.Name)
		}
		names[m.Name] = true
		if why := policy.MountPointProblem(m.Path); why != "" {
			return errBadRequest("create sandbox: volumes[%d].path: %s", i, why)
		}
		if path.Clean(m.Path) != m.Path {
			return errBadRequest("create sandbox: volumes[%d].path %q: not clean (no .., //, trailing /)", i, m.Path)
		}
		if err := ceil.CheckVolumePath(tenant, i, m.Path); err != nil {
			return err
		}
		for _, t := range taken {
			if m.Path == t || strings.HasPrefix(m.Path, t+"/") || strings.HasPrefix(t, m.Path+"/") {
				return errBadRequest("create sandbox: volumes[%d].path %q: overlaps %q (the workspace or another volume)", i, m.Path, t)
			}
		}
		taken = append(taken, m.Path)
	}
	return nil
}

// mountVolumes mounts tenant's volumes reqs (checked) for sandbox id and
// returns the binds for its spec and the release that undoes it. A
// volume the tenant does not have (another tenant's included) is
// ErrNotFound. On error nothing is left.
func (s *Server) mountVolumes(ctx context.Context, tenant, id string, reqs []api.VolumeMount) ([]sandbox.Bind, func(), error) {
	if len(reqs) == 0 {
		return nil, func() {}, nil
	}
	recs := make([]*store.VolumeRecord, len(reqs))
	for i, m := range reqs {
		v, err := s.store.GetVolume(ctx, tenant, m.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("create sandbox: volumes[%d]: %w", i, err)
		}
		recs[i] = v
	}
	s.nvols.mu.Lock()
	defer s.nvols.mu.Unlock()
	if s.nvols.mounted == nil {
		s.nvols.mounted = map[string]*volMount{}
	}
	var binds []sandbox.Bind
	var done []string
	release := func() {
		for _, vid := range done {
			s.unmountVolume(vid, id)
		}
	}
	for i, v := range recs {
		m := s.nvols.mounted[v.ID]
		if m == nil {
			vol, err := volume.Attach(s.volumeImage(v.ID), s.volumeMountDir(v.ID))
			if err != nil {
				release()
				return nil, nil, fmt.Errorf("create sandbox: volume %q: %w", v.Name, err)
			}
			m = &volMount{vol: vol, users: map[string]bool{}}
			s.nvols.mounted[v.ID] = m
		}
		m.users[id] = true
		done = append(done, v.ID)
		binds = append(binds, sandbox.Bind{Src: filepath.Join(m.vol.Dir, volumeDataDir), Dst: reqs[i].Path, ReadOnly: reqs[i].ReadOnly})
	}
	s.events.emit(audit.Event{Sandbox: id, Type: audit.TypeStart, Message: "named volumes mounted",
		Fields: map[string]any{"volumes": reqs, "tenant": tenant}})
	return binds, func() {
		s.nvols.mu.Lock()
		defer s.nvols.mu.Unlock()
		release()
	}, nil
}

// unmountVolume drops sandbox id from volume vid's users, unmounting it
// after the last (s.nvols.mu held).
func (s *Server) unmountVolume(vid, id string) {
	m := s.nvols.mounted[vid]
	if m == nil {
		return
	}
	delete(m.users, id)
	if len(m.users) > 0 {
		return
	}
	delete(s.nvols.mounted, vid)
	// Synced and unmounted, but no wait under the volumes' lock (every
	// tenant's) for the kernel to let go of the image: the next mount of
	// the volume waits for that (volume.Attach), and says who holds it.
	if err := m.vol.Detach(0); errors.Is(err, volume.ErrHeld) {
		s.log.Debug("unmount volume: image not free yet", "volume", vid, "err", err)
	} else if err != nil {
		s.log.Error("unmount volume", "volume", vid, "err", err)
	}
	os.Remove(m.vol.Dir)
}
