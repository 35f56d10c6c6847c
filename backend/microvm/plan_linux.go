package microvm

import (
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
	Layers []string // an image's layers, lowest first (Spec.Root); nil: the policy's rootfs or the host's system dirs
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
	OverlayRoots []string // host paths
	// OverlayInside maps an overlay root to its path inside, when not at
	// its host path (the workspace's workspace_mount).
	OverlayInside map[string]string
	// OverlayLayers maps each overlay root to its writable layer's
	// read-only view inside (guest.LayersDir/N).
	OverlayLayers map[string]string
	OverlaySkip   []string
}

// rootSource is the one place the sandbox's root filesystem comes from,
// as directories lowest first: an image's unpacked layers (Spec.Root,
// from the image store), else the policy's rootfs, each shared read-only
// and overlaid in the guest under a writable layer; nil when the root is
// the host's system directories the policy lists read-only (bound on an
// empty root).
func rootSource(layers []string, pol *policy.Policy) ([]string, error) {
	if len(layers) == 0 && pol.Filesystem.Rootfs != "" {
		layers = []string{pol.Filesystem.Rootfs}
	}
	for _, dir := range layers {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("rootfs %s: %w: not a directory (%v)", dir, sandbox.ErrInvalid, err)
		}
	}
	return layers, nil
}

// inImage returns the host path of p inside the topmost of layers that
// has it ("" when none).
func inImage(layers []string, p string) string {
	for i := len(layers) - 1; i >= 0; i-- {
		h := filepath.Join(layers[i], p)
		if _, err := os.Lstat(h); err == nil {
			return h
		}
	}
	return ""
}

// planVM turns a resolved policy into a VM plan with the other backends'
// semantics. It checks every host path it needs (a missing read_only,
// read_write or workspace path is ErrInvalid) and changes nothing.
func planVM(in planInput) (*vmPlan, error) {
	b := &vmPlanner{in: in, p: &vmPlan{}, srcs: map[string]string{}}
	var err error
	if b.layers, err = rootSource(in.Layers, in.Policy); err != nil {
		return nil, err
	}
	b.image = len(b.layers) > 0
	b.disk = int64(in.Policy.Limits.DiskBytes)
	if b.image {
		b.p.Boot.Root = &bootproto.Mount{Type: "9p", Path: "/", ReadOnly: true, Overlay: true, OverlaySize: b.disk, Cache: "loose"}
		for _, l := range b.layers {
			b.p.Shares = append(b.p.Shares, Share{Path: l, ReadOnly: true})
		}
	}
	roots, err := b.hostDirs()
	if err != nil {
		return nil, err
	}
	tmpfs := b.tmpfs()
	if err := b.files(); err != nil {
		return nil, err
	}
	if err := b.p.protect(in, roots, b.binds, b.srcs); err != nil {
		return nil, err
	}
	if err := b.checkMountPoints(tmpfs); err != nil {
		return nil, err
	}
	if err := b.mounts(tmpfs); err != nil {
		return nil, err
	}
	b.deny()
	lim := in.Policy.Limits
	b.p.Boot.NoFile = uint64(lim.OpenFiles)
	b.p.Boot.Pids = int64(lim.Pids)
	return b.p, nil
}

// vmPlanner is planVM's state between its stages.
type vmPlanner struct {
	in     planInput
	p      *vmPlan
	binds  []bootproto.Mount // 9p mounts, with their host sources in srcs
	srcs   map[string]string
	layers []string // the root's layers, lowest first (nil: the host's system dirs)
	image  bool     // the root is layers
	disk   int64
}

// add shares host directory src at dst (a top-level symlink becomes a
// link in the guest); optional skips a src that does not exist.
func (b *vmPlanner) add(src, dst string, ro bool, what string, optional bool) error {
	fi, err := hostfs.LstatSource(src, what, optional)
	if err != nil || fi == nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := os.Readlink(src); err == nil && hostfs.TopLevel(dst) {
			b.p.Boot.Links = append(b.p.Boot.Links, bootproto.Link{Path: dst, Target: target})
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
	b.binds = append(b.binds, bootproto.Mount{Type: "9p", Path: dst, ReadOnly: ro, Cache: cache})
	b.srcs[dst] = src
	return nil
}

// hostDirs shares the policy's host directories (read_only, workspace,
// read_write, then the caches) and returns the writable ones of the
// policy (write-back roots when protected).
func (b *vmPlanner) hostDirs() (roots []string, err error) {
	f := b.in.Policy.Filesystem
	for _, ro := range f.ReadOnly {
		if err := b.add(ro, ro, true, "read_only path", !b.image && hostfs.IsSystemDir(ro)); err != nil {
			return nil, err
		}
	}
	if ws := f.WorkspacePath(); ws != "" {
		if !filepath.IsAbs(ws) {
			return nil, fmt.Errorf("workspace %q: %w: not absolute", ws, sandbox.ErrInvalid)
		}
		if err := b.add(ws, f.WorkspaceInside(), false, "workspace", false); err != nil {
			return nil, err
		}
	}
	for _, rw := range f.ReadWrite {
		if err := b.add(rw, rw, false, "read_write path", false); err != nil {
			return nil, err
		}
	}
	for _, m := range b.binds {
		if !m.ReadOnly {
			roots = append(roots, m.Path)
		}
	}
	for _, c := range b.in.Caches {
		if err := b.add(c.Src, c.Dst, c.ReadOnly, "cache", false); err != nil {
			return nil, err
		}
	}
	return roots, nil
}

// tmpfs is the guest's tmpfs mounts: /tmp, /dev/shm and the policy's.
func (b *vmPlanner) tmpfs() []bootproto.Mount {
	tmpfs := []bootproto.Mount{
		{Type: "tmpfs", Path: "/tmp", Mode: 0o1777, Size: b.disk},
		{Type: "tmpfs", Path: "/dev/shm", Mode: 0o1777, Size: b.disk},
	}
	for _, t := range b.in.Policy.Filesystem.Tmpfs {
		if t == "/tmp" {
			continue
		}
		tmpfs = append(tmpfs, bootproto.Mount{Type: "tmpfs", Path: t, Mode: 0o755, Size: b.disk, UID: b.in.UID, GID: b.in.GID})
	}
	return tmpfs
}

// files puts the spec's files in the boot config.
func (b *vmPlanner) files() error {
	for i, file := range b.in.Files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path || file.Path == "/" {
			return fmt.Errorf("file %d path %q: %w: not absolute and clean", i, file.Path, sandbox.ErrInvalid)
		}
		b.p.Boot.Files = append(b.p.Boot.Files, bootproto.File{Path: file.Path, Data: file.Data, Mode: file.Mode})
	}
	return nil
}

// hostOf is the host path path is in a shared directory, if it is.
func (b *vmPlanner) hostOf(path string) (string, bool) {
	return hostfs.HostSource(path, b.binds, func(m bootproto.Mount) (string, string, bool) { return b.srcs[m.Path], m.Path, true })
}

// checkMountPoints: a mount point inside a shared host directory must
// exist there: the guest would create it through 9p, that is on the host.
// (The image root is not among binds: its mount points go in its writable
// layer.)
func (b *vmPlanner) checkMountPoints(tmpfs []bootproto.Mount) error {
	for _, m := range append(append([]bootproto.Mount{}, b.binds...), tmpfs...) {
		if src, ok := b.hostOf(filepath.Dir(m.Path)); ok && filepath.Dir(m.Path) != "/" {
			if _, err := os.Lstat(filepath.Join(src, filepath.Base(m.Path))); err != nil {
				return fmt.Errorf("mount point %s: %w: it does not exist in the host directory shared there (%s), and mounting there would create it on the host", m.Path, sandbox.ErrInvalid, src)
			}
		}
	}
	return nil
}

// mounts tags the shares (at most bootproto.MaxShares) and puts the
// mounts, sorted, in the boot config with each overlay's layer.
func (b *vmPlanner) mounts(tmpfs []bootproto.Mount) error {
	p, binds := b.p, b.binds
	if n := len(binds) + len(p.Shares); n > bootproto.MaxShares {
		return fmt.Errorf("policy shares %d host directories (an image's layers count one each: %d): %w: the microvm backend has %d share devices (flatten the image, or share fewer paths)", n, len(b.layers), sandbox.ErrInvalid, bootproto.MaxShares)
	}
	if p.Boot.Root != nil {
		for i := range b.layers {
			p.Shares[i].Tag = "share" + strconv.Itoa(i)
			p.Boot.RootTags = append(p.Boot.RootTags, p.Shares[i].Tag)
		}
		p.Boot.Root.Tag = p.Shares[0].Tag
		p.Boot.RootWritable = len(b.in.Layers) > 0
	}
	for i := range binds {
		binds[i].Tag = "share" + strconv.Itoa(len(p.Shares))
		p.Shares = append(p.Shares, Share{Tag: binds[i].Tag, Path: b.srcs[binds[i].Path], ReadOnly: binds[i].ReadOnly || binds[i].Overlay})
	}
	all := append(binds, tmpfs...)
	hostfs.SortMounts(all, func(m bootproto.Mount) string { return m.Path }, func(bootproto.Mount) bool { return false })
	p.Boot.Mounts = all
	for i, m := range all {
		if m.Overlay {
			if p.OverlayLayers == nil {
				p.OverlayLayers = map[string]string{}
			}
			p.OverlayLayers[b.srcs[m.Path]] = guest.LayersDir + "/" + strconv.Itoa(i)
		}
	}
	return nil
}

// deny hides the policy's deny paths that are visible in the sandbox and
// exist (in the guest, and from the VMM on the host).
func (b *vmPlanner) deny() {
	var shared []string
	for _, m := range b.binds {
		shared = append(shared, m.Path)
	}
	f := &b.in.Policy.Filesystem
	for _, hd := range f.Deny {
		d := f.Inside(hd) // where the sandbox sees it
		src, ok := b.hostOf(d)
		if !ok && b.image {
			src = inImage(b.layers, d) // inside the image root
			ok = src != ""
		}
		if !ok || (!hostfs.Under(d, shared) && !b.image) {
			continue // not visible in the sandbox at all
		}
		fi, err := os.Stat(src)
		if err != nil {
			continue // nothing there to hide
		}
		b.p.Boot.Deny = append(b.p.Boot.Deny, bootproto.Deny{Path: d, Dir: fi.IsDir()})
		b.p.HostDeny = append(b.p.HostDeny, src)
	}
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
	hostRoots := make([]string, len(roots)) // roots are inside paths
	for i, r := range roots {
		hostRoots[i] = srcs[r]
	}
	pinned := false
	for path := range g.Pinned {
		if hostfs.Under(path, hostRoots) {
			if _, err := os.Lstat(path); err == nil {
				pinned = true
			}
		}
	}
	if !g.Config && !pinned {
		return nil
	}
	p.Overlay = true
	p.OverlayRoots = hostRoots
	for i, r := range roots {
		if r != hostRoots[i] {
			if p.OverlayInside == nil {
				p.OverlayInside = map[string]string{}
			}
			p.OverlayInside[hostRoots[i]] = r
		}
	}
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
