// Package imageroot prepares the root filesystem of an image sandbox for
// the backends that mount image layers themselves (native, gvisor): the
// sandbox's writable layer (the overlay's upper and work directories, in
// one directory per sandbox, made by Make and nothing else, so that a
// size-limited filesystem can be mounted there before the layer is
// used) and the overlay's mount options. It must never write into an
// image layer (they are shared) and never remove a directory that is not
// a sandbox's writable layer under its base.
package imageroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/internal/fsutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Writable is one sandbox's writable layer: Dir holds Upper (what the
// sandbox changed) and Work (overlayfs's scratch).
type Writable struct {
	Dir, Upper, Work string
}

// Policy checks spec's image (Check) and returns the policy a backend
// enforces: the spec's, naming the image when the spec has a root for
// one and the policy does not. A policy naming an image the spec has no
// root for is refused.
func Policy(spec sandbox.Spec) (*policy.Policy, error) {
	if err := Check(spec); err != nil {
		return nil, err
	}
	pol := spec.Policy
	switch {
	case spec.Root != nil && pol.Filesystem.Image == "":
		pol = pol.Clone()
		pol.Filesystem.Image = spec.Image
		if pol.Filesystem.Image == "" {
			pol.Filesystem.Image = "(image)"
		}
	case spec.Root == nil && pol.Filesystem.Image != "":
		return nil, fmt.Errorf("policy names image %q but the spec has no root for it (resolve it through the image store): %w", pol.Filesystem.Image, sandbox.ErrInvalid)
	}
	return pol, nil
}

// Check refuses a spec whose image a layer-mounting backend cannot use:
// an image named without its layers, a directory given as an image (the
// old `--images DIR` form), layers that are not absolute directories.
func Check(spec sandbox.Spec) error {
	if spec.Root == nil {
		switch {
		case spec.Image == "":
			return nil
		case filepath.IsAbs(spec.Image):
			return fmt.Errorf("image %q is a directory: images now come from the image store (airlock image import/pull; a root filesystem directory is the policy's filesystem.rootfs): %w", spec.Image, sandbox.ErrInvalid)
		default:
			return fmt.Errorf("image %q: not resolved through the image store (Spec.Root is empty): %w", spec.Image, sandbox.ErrInvalid)
		}
	}
	if spec.Policy != nil && spec.Policy.Filesystem.Rootfs != "" {
		return fmt.Errorf("image %q and rootfs %q are exclusive: %w", spec.Image, spec.Policy.Filesystem.Rootfs, sandbox.ErrInvalid)
	}
	if len(spec.Root.Layers) == 0 {
		return fmt.Errorf("image %q: no layers: %w", spec.Image, sandbox.ErrInvalid)
	}
	for _, l := range spec.Root.Layers {
		if !filepath.IsAbs(l) || filepath.Clean(l) != l || strings.ContainsAny(l, ":,\x00") {
			return fmt.Errorf("image %q: layer path %q: want an absolute clean path without ':' or ',': %w", spec.Image, l, sandbox.ErrInvalid)
		}
		if fi, err := os.Stat(l); err != nil || !fi.IsDir() {
			return fmt.Errorf("image %q: layer %s is missing: %w", spec.Image, l, sandbox.ErrNotFound)
		}
	}
	return nil
}

// Make creates base/id, the one place a sandbox's writable layer lives:
// its upper directory (the root of the sandbox's view, so mode 0755 and
// owned by uid:gid when this process may give it away; -1 keeps ours)
// and its work directory. base is made 0700 when missing.
func Make(base, id string, uid, gid int) (*Writable, error) {
	if !sandbox.ValidID(id) || !filepath.IsAbs(base) {
		return nil, fmt.Errorf("writable layer %q under %q: %w", id, base, sandbox.ErrInvalid)
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("writable layer: %v: %w", err, sandbox.ErrUnavailable)
	}
	w := &Writable{Dir: filepath.Join(base, id)}
	w.Upper, w.Work = filepath.Join(w.Dir, "upper"), filepath.Join(w.Dir, "work")
	if err := os.Mkdir(w.Dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("writable layer %s: %w", w.Dir, sandbox.ErrExists)
		}
		return nil, fmt.Errorf("writable layer: %v: %w", err, sandbox.ErrUnavailable)
	}
	err := os.Mkdir(w.Upper, 0o755)
	if err == nil {
		err = os.Chmod(w.Upper, 0o755)
	}
	if err == nil && (uid >= 0 || gid >= 0) && os.Geteuid() == 0 {
		err = os.Lchown(w.Upper, uid, gid)
	}
	if err == nil {
		err = os.Mkdir(w.Work, 0o700)
	}
	if err != nil {
		w.Remove()
		return nil, fmt.Errorf("writable layer: %v: %w", err, sandbox.ErrUnavailable)
	}
	return w, nil
}

// Use returns the writable layer made earlier in dir (by Make), for a
// sandbox whose caller keeps it.
func Use(dir string) (*Writable, error) {
	w := &Writable{Dir: dir, Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work")}
	for _, d := range []string{w.Upper, w.Work} {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("writable layer %s: no %s (made by imageroot.Make?): %w", dir, filepath.Base(d), sandbox.ErrInvalid)
		}
	}
	return w, nil
}

// Remove removes the writable layer (what the sandbox wrote is gone).
// Idempotent.
func (w *Writable) Remove() error {
	if w == nil {
		return nil
	}
	return fsutil.RemoveAll(w.Dir)
}

// Sweep removes the writable layers under base of sandboxes that are
// neither in keep nor live (a crashed host left them).
func Sweep(base string, keep map[string]bool, live func(id string) bool) error {
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !sandbox.ValidID(id) || keep[id] || live(id) {
			continue
		}
		if err := fsutil.RemoveAll(filepath.Join(base, id)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// maxOptions is what the kernel takes as mount data (one page).
const maxOptions = 4096 - 1

// Options returns overlayfs mount options for layers (lowest first)
// under the writable layer w, and the directory to make the current one
// while mounting: layer paths are given relative to their common parent
// when that is shorter, so that images of many layers fit in the one page
// the kernel reads. userxattr: the layers mark opaque directories with
// user.overlay.opaque, which overlayfs honours in a user namespace too.
func Options(layers []string, w *Writable) (chdir, opts string, err error) {
	if len(layers) == 0 {
		return "", "", fmt.Errorf("overlay: no layers: %w", sandbox.ErrInvalid)
	}
	lower := make([]string, len(layers))
	for i, l := range layers {
		lower[len(layers)-1-i] = l // overlayfs lists the topmost first
	}
	build := func(lower []string) string {
		o := "userxattr,lowerdir=" + strings.Join(lower, ":")
		if w != nil {
			o += ",upperdir=" + w.Upper + ",workdir=" + w.Work
		}
		return o
	}
	opts = build(lower)
	if len(opts) <= maxOptions {
		return "", opts, nil
	}
	chdir = commonParent(layers)
	if chdir != "" {
		rel := make([]string, len(lower))
		for i, l := range lower {
			rel[i] = strings.TrimPrefix(l, chdir+"/")
		}
		opts = build(rel)
	}
	if len(opts) > maxOptions {
		return "", "", fmt.Errorf("overlay: the image has too many layers (%d) for one mount: %w", len(layers), sandbox.ErrNotSupported)
	}
	return chdir, opts, nil
}

func commonParent(paths []string) string {
	p := filepath.Dir(paths[0])
	for p != "/" {
		ok := true
		for _, q := range paths {
			if !strings.HasPrefix(q, p+"/") {
				ok = false
				break
			}
		}
		if ok {
			return p
		}
		p = filepath.Dir(p)
	}
	return ""
}
