package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/objstore"
	"github.com/airlock-dev/airlock/server/store"
)

// heldImages are the image leases of paused image sandboxes, by sandbox
// ID: a paused sandbox's image stays in the store (Prune and Remove leave
// an image in use alone) until it is resumed or destroyed. The zero
// value is empty.
type heldImages struct {
	mu sync.Mutex
	m  map[string]*images.Rootfs
}

func (h *heldImages) put(id string, r *images.Rootfs) {
	if r == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*images.Rootfs{}
	}
	h.m[id] = r
}

// take returns the lease held for id (nil: none) and forgets it.
func (h *heldImages) take(id string) *images.Rootfs {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.m[id]
	delete(h.m, id)
	return r
}

// keepsLayer says whether an image sandbox on backend gets a writable
// layer the server keeps (so that it can be paused): the native
// backend's; the others' stay the backend's.
func keepsLayer(backend sandbox.Backend, root *images.Rootfs) bool {
	return root != nil && backend.Name() == "native"
}

// layerPath is where sandbox id's writable layer is kept: on its volume
// (counted in its disk quota), else in the data directory.
func (s *Server) layerPath(id string, d *disk) string {
	if d.vol != nil {
		return filepath.Join(d.root, "layer")
	}
	return filepath.Join(s.cfg.DataDir, "layers", id)
}

// writableLayer gives the image sandbox id the writable layer the server
// keeps: a new one (made as its backend would: the upper directory owned
// by the sandbox's user), or with resume set the one it was paused with.
// It records the layer in d (removed with it). The writes of a sandbox
// with a host id range are stored with its inside ids (the layers are
// idmapped through its namespace), so unlike its workspace the layer
// needs no owner shift when a resume leases other host ids.
func (s *Server) writableLayer(id string, d *disk, pol *policy.Policy, resume bool) (string, error) {
	dir := s.layerPath(id, d)
	if resume {
		if _, err := imageroot.Use(dir); err != nil {
			return "", objstore.Corrupt("its writable layer is gone (%v)", err)
		}
		d.layer = dir
		return dir, nil
	}
	uid, gid, err := pol.Process.Credentials(os.Getuid(), os.Getgid())
	if err != nil {
		return "", fmt.Errorf("create sandbox %q: %w", id, err)
	}
	if _, err := imageroot.Make(filepath.Dir(dir), filepath.Base(dir), uid, gid); err != nil {
		return "", fmt.Errorf("create sandbox %q: %w", id, err)
	}
	d.layer = dir
	return dir, nil
}

// removeLayer removes d's writable layer (after its sandbox is gone).
func (d *disk) removeLayer() error {
	if d.layer == "" {
		return nil
	}
	return fsutil.RemoveAll(d.layer)
}

// imageFor holds paused image sandbox id's image again for its resume:
// the lease kept since its pause, else (a restarted server's) its image
// by ID. nil for a sandbox without an image.
func (s *Server) imageFor(ctx context.Context, id string, lr *store.LifeRow) (*images.Rootfs, error) {
	if r := s.held.take(id); r != nil {
		return r, nil
	}
	if lr.Image == "" {
		return nil, nil
	}
	if s.cfg.Images == nil {
		return nil, fmt.Errorf("resume sandbox %q: image %s: this server has no image store: %w", id, lr.Image, sandbox.ErrUnavailable)
	}
	r, err := s.cfg.Images.Acquire(ctx, lr.Image, id, images.AcquireOptions{})
	if err != nil {
		return nil, fmt.Errorf("resume sandbox %q: %w", id, err)
	}
	return r, nil
}

// holdPausedImages takes again the image leases of the paused image
// sandboxes ids a previous server left (its leases died with it).
func (s *Server) holdPausedImages(ctx context.Context, ids []string) {
	for _, id := range ids {
		lr, err := s.store.GetLifecycle(ctx, id)
		if err != nil || lr.Image == "" || s.cfg.Images == nil {
			continue
		}
		r, err := s.cfg.Images.Acquire(ctx, lr.Image, id, images.AcquireOptions{})
		if err != nil {
			s.log.Error("reconcile: hold the image of a paused sandbox", "sandbox", id, "image", lr.Image, "err", err)
			continue
		}
		s.held.put(id, r)
	}
}

// layerPrefix starts the paths of a writable layer's entries in a pause
// manifest: a workspace's are relative, so they never collide.
const layerPrefix = "/layer/"

// pausedManifest is the manifest a pause records of a sandbox's files:
// its workspace (owners relative to base) and, for an image sandbox, the
// upper directory of its writable layer (owners as stored: its inside
// ids). Whiteouts and overlay xattrs are not in it (scanTree skips
// devices and reads no xattrs).
func pausedManifest(ctx context.Context, d *disk, base objstore.Owner, version int) (*objstore.Manifest, error) {
	sc := objstore.NewScan(ctx, "manifest of a paused sandbox", version)
	m, _, _, err := objstore.ScanTree(d.workspace, base, nil, sc)
	if err != nil {
		return nil, fmt.Errorf("manifest of the workspace: %w", err)
	}
	if d.layer == "" {
		return m, nil
	}
	up, _, _, err := objstore.ScanTree(filepath.Join(d.layer, "upper"), objstore.Owner{}, nil, sc)
	if err != nil {
		return nil, fmt.Errorf("manifest of the writable layer: %w", err)
	}
	for _, e := range up.Entries {
		e.Path = layerPrefix + e.Path
		m.Entries = append(m.Entries, e)
	}
	return m, nil
}
