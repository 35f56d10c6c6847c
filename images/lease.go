package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/userspec"
	"github.com/airlock-dev/airlock/sandbox"
)

// Rootfs is an image held for one sandbox: its unpacked layers, lowest
// first, stay in the store until Release (Prune and Remove leave an image
// in use alone). Backends mount Layers as the read-only lower layers of
// the sandbox's overlay root.
type Rootfs struct {
	Image  *Image
	Layers []string // unpacked layer trees, lowest first
	lease  *fileLock
	path   string

	usersMu sync.Mutex
	users   map[string]userspec.User // User's answers
}

// Release lets the store collect the image again. Idempotent.
func (r *Rootfs) Release() {
	if r == nil || r.lease == nil {
		return
	}
	os.Remove(r.path)
	r.lease.unlock()
	r.lease = nil
}

// AcquireOptions are the choices of one Acquire.
type AcquireOptions struct {
	// SetID asks for layers with their set-uid/set-gid bits and file
	// capabilities kept (unpacked again from the stored blobs the first
	// time); default stripped.
	SetID bool
}

// Acquire finds ref and holds it for holder (a sandbox ID: one lease
// each) until Release. The lease is a file lock held by this process, so
// a holder that dies releases it with its last descriptor.
func (s *Store) Acquire(ctx context.Context, ref, holder string, opts AcquireOptions) (*Rootfs, error) {
	if holder == "" || strings.ContainsAny(holder, "/\x00") || holder == "." || holder == ".." || len(holder) > 200 {
		return nil, fmt.Errorf("acquire image %q: bad holder %q: %w", ref, holder, errdefs.ErrInvalid)
	}
	p := filepath.Join(s.root, "leases", holder)
	var out *Rootfs
	err := func() error {
		l, err := s.lock(ctx)
		if err != nil {
			return err
		}
		defer l.unlock()
		ix, err := s.readIndex()
		if err != nil {
			return err
		}
		im, err := find(ix, ref)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(p); err == nil {
			// A lease whose holder died (a server that restarted and
			// holds its paused sandboxes' images again) is taken over.
			stale, terr := tryLock(p)
			if terr != nil || stale == nil {
				return fmt.Errorf("lease %q: %w", holder, errdefs.ErrExists)
			}
			os.Remove(p)
			stale.unlock()
		}
		lease, err := lockFile(ctx, p, false)
		if err != nil {
			return err
		}
		if err := writeFileSync(p, []byte(im.ID+"\n"), 0o600); err != nil {
			lease.unlock()
			os.Remove(p)
			return err
		}
		out = &Rootfs{Image: im, lease: lease, path: p}
		return nil
	}()
	if err != nil {
		return nil, fmt.Errorf("acquire image %q: %w", ref, err)
	}
	for _, l := range out.Image.Layers {
		dir := s.layerDir(l.DiffID, opts.SetID)
		if _, err := os.Lstat(LayerFS(dir)); err != nil {
			if !opts.SetID {
				out.Release()
				return nil, fmt.Errorf("acquire image %q: layer %s is missing from the store (run airlock image pull again): %w", ref, l.DiffID, errdefs.ErrNotFound)
			}
			if err := s.unpackStored(ctx, l, true); err != nil {
				out.Release()
				return nil, fmt.Errorf("acquire image %q: %w", ref, err)
			}
		}
		out.Layers = append(out.Layers, LayerFS(dir))
	}
	return out, nil
}

// inUse returns the IDs of images held by a live lease, removing leases
// whose holder is gone. Called under the store's lock.
func (s *Store) inUse(ix *index) map[string]bool {
	used := map[string]bool{}
	dir := filepath.Join(s.root, "leases")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return used
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		l, err := tryLock(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && l != nil {
			os.Remove(p) // nobody holds it: the holder died
			l.unlock()
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		used[strings.TrimSpace(string(b))] = true
	}
	return used
}

// SandboxRoot is what a backend mounts for this image (sandbox.Spec.Root).
func (r *Rootfs) SandboxRoot() *sandbox.ImageRoot {
	return &sandbox.ImageRoot{Layers: append([]string{}, r.Layers...)}
}
