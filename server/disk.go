package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/internal/volume"
	"github.com/airlock-dev/airlock/sandbox"
)

// Disk quota modes (Config.DiskQuota).
const (
	DiskQuotaNone   = "none"   // plain directories, no quota
	DiskQuotaVolume = "volume" // an ext4 image per sandbox (internal/volume)
)

// disk is a sandbox's files on the host: its workspace and scratch
// directory, on a volume of its own (limits.disk bytes) or plain
// directories.
type disk struct {
	root      string // DataDir/volumes/ID (the mount point), or the workspace itself
	workspace string
	scratch   string // where a backend keeps writable layers ("" without volumes)
	layer     string // an image sandbox's writable layer the server keeps ("": none; imagepause.go)
	vol       *volume.Volume
	files     diskFiles // the server's own open files on vol (diskfiles.go)
}

// serverFiles is where the server's own files on d are registered: its
// volume's (closed before it detaches), nil without one.
func (d *disk) serverFiles() *diskFiles {
	if d == nil || d.vol == nil {
		return nil
	}
	return &d.files
}

// workspacePath is where sandbox id's workspace will be: with volumes,
// on the volume mounted below RunDir (a path every sandbox's host ids can
// search, whatever the data directory's parents are); else below the
// data directory.
func (s *Server) workspacePath(id string) string {
	if s.cfg.DiskQuota == DiskQuotaVolume {
		return filepath.Join(s.cfg.RunDir, "volumes", id, "workspace")
	}
	return filepath.Join(s.cfg.DataDir, "workspaces", id)
}

// makeDisk makes sandbox id's files: with volumes, an image of size bytes
// (size 0, which only the operator's own requests can ask: plain
// directories) mounted at DataDir/volumes/ID, holding workspace/ and
// scratch/. On error nothing is left.
func (s *Server) makeDisk(ctx context.Context, id, ws string, size int64) (*disk, error) {
	if s.cfg.DiskQuota != DiskQuotaVolume {
		if err := mkdirExact(ws, 0o755); err != nil {
			return nil, fmt.Errorf("create sandbox %q: workspace: %w", id, err)
		}
		return &disk{root: ws, workspace: ws}, nil
	}
	d := &disk{root: filepath.Dir(ws), workspace: ws, scratch: filepath.Join(filepath.Dir(ws), "scratch")}
	if size > 0 {
		if size < volume.MinSize {
			size = volume.MinSize
		}
		if err := s.checkDiskCommit(size); err != nil {
			return nil, fmt.Errorf("create sandbox %q: %w", id, err)
		}
		img := filepath.Join(s.cfg.DataDir, "volumes", id+".img")
		v, err := volume.Create(ctx, img, d.root, size, 0, 0)
		if err != nil {
			os.Remove(d.root)
			return nil, fmt.Errorf("create sandbox %q: disk quota: %w", id, err)
		}
		d.vol = v
	} else if err := mkdirExact(d.root, 0o711); err != nil {
		return nil, fmt.Errorf("create sandbox %q: workspace: %w", id, err)
	}
	// The volume's root is root's (search only); the workspace is given
	// to the sandbox's host ids by its backend, the scratch directory
	// stays the backend's.
	err := os.Chmod(d.root, 0o711)
	if err == nil {
		err = mkdirExact(d.workspace, 0o755)
	}
	if err == nil {
		err = mkdirExact(d.scratch, 0o700)
	}
	if err != nil {
		d.remove()
		return nil, fmt.Errorf("create sandbox %q: workspace: %w", id, err)
	}
	s.mu.Lock()
	s.volumes[d] = struct{}{}
	s.mu.Unlock()
	return d, nil
}

// remove unmounts and deletes everything of d. Idempotent.
func (d *disk) remove() error {
	if d == nil {
		return nil
	}
	var errs []error
	if d.vol != nil {
		d.files.close()
		// Unmounted, image deleted: no wait for other holders of what
		// is being deleted.
		errs = append(errs, d.vol.Remove())
	}
	errs = append(errs, os.RemoveAll(d.root), d.removeLayer())
	return errors.Join(errs...)
}

// release forgets d in the server's accounting.
func (s *Server) releaseDisk(d *disk) error {
	s.mu.Lock()
	delete(s.volumes, d)
	s.mu.Unlock()
	return d.remove()
}

func mkdirExact(p string, mode os.FileMode) error {
	if err := os.Mkdir(p, mode); err != nil {
		return err
	}
	// Exactly mode whatever the process umask (which serve never changes).
	if err := os.Chmod(p, mode); err != nil {
		os.Remove(p)
		return err
	}
	return nil
}

// checkDiskCommit refuses a volume that, with what the live volumes may
// still grow (their images are sparse), could fill the data directory's
// filesystem below MinFree: a full data disk is the one thing the store
// must never see.
func (s *Server) checkDiskCommit(size int64) error {
	if s.storage == nil {
		return nil
	}
	free, err := s.storage.free(s.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("disk quota: free space: %v: %w", err, sandbox.ErrUnavailable)
	}
	s.mu.Lock()
	var growth int64
	for d := range s.volumes {
		if d.vol == nil {
			continue
		}
		growth += max(d.vol.Size-allocated(d.vol.Image), 0)
	}
	s.mu.Unlock()
	need := uint64(growth + size + int64(s.storage.min))
	if free < need {
		return &httpError{api.CodeInsufficientStorage, fmt.Errorf("disk quota of %d bytes: the data directory has %d bytes free, its live volumes may still take %d and the server keeps %d: %w",
			size, free, growth, s.storage.min, sandbox.ErrLimit)}
	}
	return nil
}

// sweepDisks removes every sandbox's files a previous server left but
// those named in keep (paused sandboxes': "ID.img", "ID").
func (s *Server) sweepDisks(keep map[string]bool) error {
	var errs []error
	mounts := filepath.Join(s.cfg.RunDir, "volumes")
	if err := volume.Sweep(mounts); err != nil {
		errs = append(errs, fmt.Errorf("reconcile: unmount volumes: %w", err))
	}
	if err := os.MkdirAll(s.cfg.RunDir, 0o711); err != nil {
		errs = append(errs, fmt.Errorf("reconcile: %s: %w", s.cfg.RunDir, err))
	}
	for _, d := range []string{mounts, filepath.Join(s.cfg.DataDir, "volumes"), filepath.Join(s.cfg.DataDir, "workspaces"), filepath.Join(s.cfg.DataDir, "checkpoints"), filepath.Join(s.cfg.DataDir, "layers")} {
		if err := removeAllBut(d, keep); err != nil {
			errs = append(errs, fmt.Errorf("reconcile: remove %s: %w", d, err))
		}
		if err := os.Mkdir(d, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
			errs = append(errs, fmt.Errorf("reconcile: %s: %w", d, err))
		}
		if err := os.Chmod(d, 0o711); err != nil {
			errs = append(errs, fmt.Errorf("reconcile: %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
