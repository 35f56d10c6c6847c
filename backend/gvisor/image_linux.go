package gvisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/imageroot"
	"github.com/airlock-dev/airlock/sandbox"
)

// An image sandbox's root is an overlay mounted on the host at the
// bundle's rootfs: the image's layers read-only (shared) under the
// sandbox's writable layer (imageroot.Make). runsc's gofer serves it as
// it serves the skeleton root of other sandboxes; it is writable. With a
// host id range it is made as the native backend makes its own
// (imageroot.MappedOverlay): the image's root files belong to the
// range's root, which runsc's gofer is, so root inside may change them.

// mountImageRoot makes the writable layer and mounts the overlay at
// bundle/rootfs.
func (b *Backend) mountImageRoot(p *prepared) (*imageroot.Writable, error) {
	var w *imageroot.Writable
	var err error
	remove := func() {}
	if p.spec.Root.Writable != "" {
		// The caller's (a build step): used, never removed here.
		if w, err = imageroot.Use(p.spec.Root.Writable); err != nil {
			return nil, err
		}
	} else {
		// Its upper directory is the root the sandbox sees: with a range,
		// idmapped, so stored as its user inside.
		uid, gid := -1, -1
		if p.lease != nil {
			uid, gid = p.uid, p.gid
		}
		if w, err = imageroot.Make(b.cfg.WritableDir, p.spec.ID, uid, gid); err != nil {
			return nil, err
		}
		remove = func() { w.Remove() }
	}
	root := filepath.Join(p.dir, bundleRootfs)
	if p.lease != nil {
		ov, err := imageroot.MappedOverlay(p.agentBin, p.spec.Root.Layers, w, p.lease.UID, p.lease.GID, p.lease.Count)
		if err != nil {
			remove()
			return nil, err
		}
		defer ov.Close()
		if err = os.Mkdir(root, 0o755); err == nil {
			err = imageroot.Attach(int(ov.Fd()), root)
		}
		if err != nil {
			remove()
			return nil, fmt.Errorf("image root: attach the overlay: %v: %w", err, sandbox.ErrUnavailable)
		}
		return w, nil
	}
	chdir, opts, err := imageroot.Options(p.spec.Root.Layers, w)
	if err == nil && chdir != "" {
		// Relative layer paths need a chdir, which is process-wide here.
		err = fmt.Errorf("overlay: the image has too many layers (%d) for one mount on this backend: %w", len(p.spec.Root.Layers), sandbox.ErrNotSupported)
	}
	if err != nil {
		remove()
		return nil, err
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		remove()
		return nil, fmt.Errorf("image root: %v: %w", err, sandbox.ErrUnavailable)
	}
	if err := unix.Mount("overlay", root, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		remove()
		return nil, fmt.Errorf("image root: mount overlayfs (needs root): %v: %w", err, sandbox.ErrUnavailable)
	}
	return w, nil
}

// unmountImageRoot unmounts a bundle's image root (if it has one) and
// removes the writable layer of sandbox id.
func (b *Backend) unmountImageRoot(bundle, id string) error {
	var errs []error
	root := filepath.Join(bundle, bundleRootfs)
	if err := unix.Unmount(root, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("unmount image root: %w", err))
	}
	if sandbox.ValidID(id) {
		w := &imageroot.Writable{Dir: filepath.Join(b.cfg.WritableDir, id)}
		if err := w.Remove(); err != nil {
			errs = append(errs, fmt.Errorf("remove writable layer: %w", err))
		}
	}
	return errors.Join(errs...)
}
