package microvm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/backend/microvm/guest"
	"github.com/airlock-dev/airlock/backend/microvm/internal/bootproto"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// planInput is what planVM needs besides the policy.
type planInput struct {
	Policy *policy.Policy
	Image  string // Spec.Image: a root directory ("" = the host's system dirs)
	Files  []sandbox.File
	Caches []sandbox.Bind
	UID    int
	GID    int
	Guard  *policy.ConfigGuard // nil: nothing protected
}

// vmPlan is a sandbox's filesystem as a VM sees it: the host directories
// shared over 9p and the guest's boot config (mounts in order, links,
// files, deny mounts, limits). Overlay says the writable host paths are
// shared read-only with a writable layer inside, written back by Sync.
type vmPlan struct {
	Shares       []Share
	Boot         bootproto.Config
	HostDeny     []string // denied host paths inside shared trees (hidden from the VMM too)
	Overlay      bool
	OverlayRoots []string
	// OverlayLayers maps each overlay root to its writable layer's
	// read-only view inside (guest.LayersDir/N).
	OverlayLayers map[string]string
	OverlaySkip   []string
}

// rootSource is the one place the sandbox's root filesystem comes from:
// the image directory when one is given (Spec.Image, else the policy's
// rootfs: an OCI image's unpacked layers plug in here), shared read-only
// with a writable layer in the guest; "" when the root is the host's
// system directories the policy lists read-only (bound on an empty root).
func rootSource(spec string, pol *policy.Policy) (string, error) {
	dir := spec
	if dir == "" {
		dir = pol.Filesystem.Rootfs
	}
	if dir == "" {
		return "", nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("rootfs %s: %w: not a directory (%v)", dir, sandbox.ErrInvalid, err)
	}
	return dir, nil
}

// planVM turns a resolved policy into a VM plan with the other backends'
// semantics. It checks every host path it needs (a missing read_only,
// read_write or workspace path is ErrInvalid) and changes nothing.
func planVM(in planInput) (*vmPlan, error) {
	f := in.Policy.Filesystem
	p := &vmPlan{}
	var binds []bootproto.Mount // 9p mounts, with their host sources in srcs
	srcs := map[string]string{}
	add := func(src, dst string, ro bool, what string, optional bool) error {
		fi, err := os.Lstat(src)
		if err != nil {
			if optional && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err := os.Readlink(src); err == nil && hostfs.TopLevel(dst) {
				p.Boot.Links = append(p.Boot.Links, bootproto.Link{Path: dst, Target: target})
				return nil
			}
			if fi, err = os.Stat(src); err != nil {
				return fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
			}
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s %s: %w: the microvm backend shares directories only", what, src, sandbox.ErrInvalid)
		}
		cache := ""
		if ro {
			cache = "loose" // the host's read-only trees: cache them in the guest
		}
		binds = append(binds, bootproto.Mount{Type: "9p", Path: dst, ReadOnly: ro, Cache: cache})
		srcs[dst] = src
		return nil
	}
	image, err := rootSource(in.Image, in.Policy)
	if err != nil {
		return nil, err
	}
	disk := int64(in.Policy.Limits.DiskBytes)
	if image != "" {
		p.Boot.Root = &bootproto.Mount{Type: "9p", Path: "/", ReadOnly: true, Overlay: true, OverlaySize: disk, Cache: "loose"}
		p.Shares = append(p.Shares, Share{Path: image, ReadOnly: true})
	}
	for _, ro := range f.ReadOnly {
		if err := add(ro, ro, true, "read_only path", image == "" && hostfs.IsSystemDir(ro)); err != nil {
			return nil, err
		}
	}
	ws := f.WorkspacePath()
	if ws != "" {
		if !filepath.IsAbs(ws) {
			return nil, fmt.Errorf("workspace %q: %w: not absolute", ws, sandbox.ErrInvalid)
		}
		if err := add(ws, ws, false, "workspace", false); err != nil {
			return nil, err
		}
	}
	for _, rw := range f.ReadWrite {
		if err := add(rw, rw, false, "read_write path", false); err != nil {
			return nil, err
		}
	}
	var roots []string // writable host paths (write-back roots when protected)
	for _, m := range binds {
		if !m.ReadOnly {
			roots = append(roots, m.Path)
		}
	}
	for _, c := range in.Caches {
		if err := add(c.Src, c.Dst, c.ReadOnly, "cache", false); err != nil {
			return nil, err
		}
	}
	tmpfs := []bootproto.Mount{
		{Type: "tmpfs", Path: "/tmp", Mode: 0o1777, Size: disk},
		{Type: "tmpfs", Path: "/dev/shm", Mode: 0o1777, Size: disk},
	}
	for _, t := range f.Tmpfs {
		if t == "/tmp" {
			continue
		}
		tmpfs = append(tmpfs, bootproto.Mount{Type: "tmpfs", Path: t, Mode: 0o755, Size: disk, UID: in.UID, GID: in.GID})
	}
	for i, file := range in.Files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path || file.Path == "/" {
			return nil, fmt.Errorf("file %d path %q: %w: not absolute and clean", i, file.Path, sandbox.ErrInvalid)
		}
		p.Boot.Files = append(p.Boot.Files, bootproto.File{Path: file.Path, Data: file.Data, Mode: file.Mode})
	}
	if err := p.protect(in, roots, binds, srcs); err != nil {
		return nil, err
	}
	// A mount point inside a shared host directory must exist there: the
	// guest would create it through 9p, that is on the host. (The image
	// root is not among binds: its mount points go in its writable layer.)
	hostOf := func(path string) (string, bool) {
		return hostfs.HostSource(path, binds, func(m bootproto.Mount) (string, string, bool) { return srcs[m.Path], m.Path, true })
	}
	for _, m := range append(append([]bootproto.Mount{}, binds...), tmpfs...) {
		if src, ok := hostOf(filepath.Dir(m.Path)); ok && filepath.Dir(m.Path) != "/" {
			if _, err := os.Lstat(filepath.Join(src, filepath.Base(m.Path))); err != nil {
				return nil, fmt.Errorf("mount point %s: %w: it does not exist in the host directory shared there (%s), and mounting there would create it on the host", m.Path, sandbox.ErrInvalid, src)
			}
		}
	}
	if n := len(binds) + len(p.Shares); n > bootproto.MaxShares {
		return nil, fmt.Errorf("policy shares %d host directories: %w: the microvm backend has %d share devices", n, sandbox.ErrInvalid, bootproto.MaxShares)
	}
	if p.Boot.Root != nil {
		p.Shares[0].Tag, p.Boot.Root.Tag = "share0", "share0"
	}
	for i := range binds {
		binds[i].Tag = "share" + strconv.Itoa(len(p.Shares))
		p.Shares = append(p.Shares, Share{Tag: binds[i].Tag, Path: srcs[binds[i].Path], ReadOnly: binds[i].ReadOnly || binds[i].Overlay})
	}
	all := append(binds, tmpfs...)
	hostfs.SortMounts(all, func(m bootproto.Mount) string { return m.Path }, func(bootproto.Mount) bool { return false })
	p.Boot.Mounts = all
	for i, m := range all {
		if m.Overlay {
			if p.OverlayLayers == nil {
				p.OverlayLayers = map[string]string{}
			}
			p.OverlayLayers[m.Path] = guest.LayersDir + "/" + strconv.Itoa(i)
		}
	}
	var shared []string
	for _, m := range binds {
		shared = append(shared, m.Path)
	}
	for _, d := range f.Deny {
		src, ok := hostOf(d)
		if !ok && image != "" {
			src, ok = filepath.Join(image, d), true // inside the image root
		}
		if !ok || (!hostfs.Under(d, shared) && image == "") {
			continue // not visible in the sandbox at all
		}
		fi, err := os.Stat(src)
		if err != nil {
			continue // nothing there to hide
		}
		p.Boot.Deny = append(p.Boot.Deny, bootproto.Deny{Path: d, Dir: fi.IsDir()})
		p.HostDeny = append(p.HostDeny, src)
	}
	lim := in.Policy.Limits
	p.Boot.NoFile = uint64(lim.OpenFiles)
	p.Boot.Pids = int64(lim.Pids)
	return p, nil
}

// protect decides the overlay: with protect_config on (or a pinned file in
// a writable path) the writable shares are read-only at the host and get
// a writable layer in the guest; Sync brings the changes back through the
// guard (see RATIONALE: "Why does microvm write back...").
func (p *vmPlan) protect(in planInput, roots []string, binds []bootproto.Mount, srcs map[string]string) error {
	g := in.Guard
	if g == nil || len(roots) == 0 {
		return nil
	}
	pinned := false
	for path := range g.Pinned {
		if hostfs.Under(path, roots) {
			if _, err := os.Lstat(path); err == nil {
				pinned = true
			}
		}
	}
	if !g.Config && !pinned {
		return nil
	}
	p.Overlay = true
	p.OverlayRoots = roots
	for i := range binds {
		if slices.Contains(roots, binds[i].Path) {
			binds[i].Overlay = true
			binds[i].OverlaySize = int64(in.Policy.Limits.DiskBytes)
		} else if hostfs.Under(binds[i].Path, roots) {
			p.OverlaySkip = append(p.OverlaySkip, binds[i].Path)
		}
	}
	return nil
}
