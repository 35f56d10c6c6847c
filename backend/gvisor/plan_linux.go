package gvisor

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// AgentPath is where the airlock binary appears inside every sandbox.
const AgentPath = "/.airlock/airlock"

// Names inside a bundle directory.
const (
	bundleRootfs   = "rootfs"   // the empty read-only root: mount points and top-level links
	bundleDenyDir  = "deny-dir" // empty mode-000 directory mounted over denied directories
	bundleDenyFile = "deny-file"
	bundleFiles    = "files" // Spec.Files, one file each
)

// mountPlan is the filesystem part of a bundle: the OCI mounts, what the
// root skeleton must hold and the injected files.
type mountPlan struct {
	Mounts []ociMount
	Links  map[string]string // top-level symlinks in the root: name -> target
	Files  []sandbox.File    // written under files/N, bound at Path
	// Overlay: the sandbox's writes to host paths stay in an overlay
	// (runsc --overlay2) and come back through write-back (Sync), decided
	// by the guard; OverlayRoots are those host paths, OverlaySkip the
	// sandbox's own mounts below them (never synced).
	Overlay      bool
	OverlayRoots []string
	OverlaySkip  []string
	// OverlayInside maps an overlay root (a host path) to where the
	// sandbox sees it, when that is elsewhere (the workspace at
	// workspace_mount).
	OverlayInside map[string]string
	// Image: the root is an image's overlay, mounted at the bundle's
	// rootfs by the backend (writable), not a skeleton.
	Image bool
	// RuntimeMountPoints: the root's missing mount points are left for
	// runsc to make (through its gofer, as the sandbox's range root): an
	// image root of a sandbox with a host id range, where host root makes
	// nothing (its ids are not the range's).
	RuntimeMountPoints bool
}

// planInput is what planMounts needs besides the policy.
type planInput struct {
	Policy *policy.Policy
	Rootfs string // image root directory ("" = the host's system dirs)
	Files  []sandbox.File
	Bundle string // bundle directory (sources of deny mounts and files)
	// Unmapped: the sandbox runs as a leased host id range (no host user).
	Unmapped bool
	UID      int // owner of extra tmpfs mounts (home dirs)
	GID      int
	// Guard is what writes to host paths must respect; nil: nothing.
	Guard *policy.ConfigGuard
}

// planMounts turns a resolved policy into OCI mounts with the native
// backend's semantics. It checks every host path it needs (a missing
// read_only, read_write or workspace path is ErrInvalid); it changes
// nothing on the host.
//
// gVisor cannot mediate the sandbox's writes to host paths one by one as
// the native backend does (its gofer writes them), so with protect_config
// on (or a pinned file in a writable path) every mount gets an overlay:
// the host paths are not written while the sandbox runs, and Sync brings
// the changes back through the same rules. Pinned files are also bound
// read-only, so that writing them fails at once.
func planMounts(in planInput) (*mountPlan, error) {
	f := in.Policy.Filesystem
	b := &mountPlanner{in: in, f: &f, p: &mountPlan{Links: map[string]string{}}}
	if err := b.rootfs(); err != nil {
		return nil, err
	}
	for _, ro := range b.f.ReadOnly {
		if err := b.bind(ro, hostfs.Inside(b.f, ro), true, "read_only path", in.Rootfs == "" && hostfs.IsSystemDir(ro)); err != nil {
			return nil, err
		}
	}
	b.tmpfs()
	ws, err := b.writable()
	if err != nil {
		return nil, err
	}
	if err := b.files(); err != nil {
		return nil, err
	}
	if err := b.checkMountPoints(); err != nil {
		return nil, err
	}
	b.p.Mounts = append(b.p.Mounts, bindMount("", AgentPath, true)) // source filled in by the caller
	b.deny()
	if err := b.p.protect(in, ws); err != nil {
		return nil, err
	}
	sortMounts(b.p.Mounts)
	return b.p, nil
}

// mountPlanner is planMounts' state between its stages.
type mountPlanner struct {
	in    planInput
	f     *policy.Filesystem
	p     *mountPlan
	binds []string // destinations of host binds: deny paths outside them are moot
}

// bind binds host path src at dst (a top-level symlink becomes a link);
// optional skips a src that does not exist.
func (b *mountPlanner) bind(src, dst string, ro bool, what string, optional bool) error {
	fi, err := hostfs.LstatSource(src, what, optional)
	if err != nil || fi == nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := os.Readlink(src); err == nil && hostfs.TopLevel(dst) {
			b.p.Links[dst[1:]] = target
			return nil
		}
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
		}
	}
	b.p.Mounts = append(b.p.Mounts, bindMount(src, dst, ro))
	b.binds = append(b.binds, dst)
	return nil
}

// rootfs binds the top-level entries of the rootfs directory, if any,
// read-only.
func (b *mountPlanner) rootfs() error {
	if b.in.Rootfs == "" {
		return nil
	}
	ents, err := os.ReadDir(b.in.Rootfs)
	if err != nil {
		return fmt.Errorf("rootfs %s: %w: %v", b.in.Rootfs, sandbox.ErrInvalid, err)
	}
	for _, e := range ents {
		switch e.Name() {
		case "proc", "dev", "sys", "tmp", ".airlock":
			continue
		}
		if err := b.bind(filepath.Join(b.in.Rootfs, e.Name()), "/"+e.Name(), true, "rootfs", false); err != nil {
			return err
		}
	}
	return nil
}

// tmpfs adds /proc, /dev, /dev/shm, /tmp and the policy's tmpfs mounts.
func (b *mountPlanner) tmpfs() {
	disk := int64(b.in.Policy.Limits.DiskBytes)
	b.p.Mounts = append(b.p.Mounts,
		ociMount{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		ociMount{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755", "size=65536k"}},
		ociMount{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: tmpfsOptions(01777, disk, -1, -1)},
		ociMount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: tmpfsOptions(01777, disk, -1, -1)},
	)
	for _, t := range b.f.Tmpfs {
		if t == "/tmp" {
			continue
		}
		b.p.Mounts = append(b.p.Mounts, ociMount{Destination: t, Type: "tmpfs", Source: "tmpfs", Options: tmpfsOptions(0o755, disk, b.in.UID, b.in.GID)})
	}
}

// writable binds the workspace and the read_write paths; it returns the
// workspace's host path ("" without one).
func (b *mountPlanner) writable() (string, error) {
	ws := b.f.WorkspacePath()
	if ws != "" {
		if !filepath.IsAbs(ws) {
			return "", fmt.Errorf("workspace %q: %w: not absolute", ws, sandbox.ErrInvalid)
		}
		if err := b.bind(ws, b.f.WorkspaceInside(), false, "workspace", false); err != nil {
			return "", err
		}
	}
	for _, rw := range b.f.ReadWrite {
		if err := b.bind(rw, hostfs.Inside(b.f, rw), false, "read_write path", false); err != nil {
			return "", err
		}
	}
	return ws, nil
}

// files binds the spec's files read-only from the bundle.
func (b *mountPlanner) files() error {
	for i, file := range b.in.Files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path || file.Path == "/" {
			return fmt.Errorf("file %d path %q: %w: not absolute and clean", i, file.Path, sandbox.ErrInvalid)
		}
		b.p.Files = append(b.p.Files, file)
		b.p.Mounts = append(b.p.Mounts, bindMount(filepath.Join(b.in.Bundle, bundleFiles, strconv.Itoa(i)), file.Path, true))
	}
	return nil
}

// checkMountPoints: gVisor creates a missing mount point through the
// gofer, that is on the host: never let that happen inside a host
// directory.
func (b *mountPlanner) checkMountPoints() error {
	for _, m := range b.p.Mounts {
		if m.Type == "bind" && !strings.HasPrefix(m.Source, b.in.Bundle+"/") {
			continue // a host path at the same place: it exists
		}
		if src, ok := hostPathOf(m.Destination, b.p.Mounts, b.in.Bundle); ok {
			if _, err := os.Lstat(src); err != nil {
				return fmt.Errorf("mount point %s: %w: it does not exist in the host directory mounted there (%s), and mounting there would create it on the host", m.Destination, sandbox.ErrInvalid, src)
			}
		}
	}
	return nil
}

// deny covers the deny paths visible in the sandbox that exist.
func (b *mountPlanner) deny() {
	for _, d := range b.f.Deny {
		if !hostfs.Under(hostfs.Inside(b.f, d), b.binds) {
			continue // not visible in the sandbox at all
		}
		fi, err := os.Stat(d)
		if err != nil {
			continue // nothing there to hide
		}
		if b.in.Unmapped && fi.Mode().Perm()&0o004 == 0 {
			// Host ids of its own: what others may not read stays
			// unreadable anyway (and runsc's gofer, one of those ids,
			// could not open it to cover it).
			continue
		}
		src := filepath.Join(b.in.Bundle, bundleDenyFile)
		if fi.IsDir() {
			src = filepath.Join(b.in.Bundle, bundleDenyDir)
		}
		b.p.Mounts = append(b.p.Mounts, denyMount(src, hostfs.Inside(b.f, d)))
	}
}

// protect decides the overlay and binds pinned files read-only; see
// planMounts.
func (p *mountPlan) protect(in planInput, ws string) error {
	g := in.Guard
	if g == nil {
		return nil
	}
	roots := append([]string{}, in.Policy.Filesystem.ReadWrite...)
	if ws != "" {
		roots = append([]string{ws}, roots...)
	}
	if len(roots) == 0 {
		return nil
	}
	pinned := false
	for path := range g.Pinned {
		if hostfs.Under(path, roots) {
			if _, err := os.Lstat(path); err == nil {
				p.Mounts = append(p.Mounts, bindMount(path, hostfs.Inside(&in.Policy.Filesystem, path), true))
				pinned = true
			}
		}
	}
	if !g.Config && !pinned {
		return nil
	}
	p.Overlay = true
	p.OverlayRoots = roots
	inside := append([]string{}, roots...)
	if in := in.Policy.Filesystem.WorkspaceInside(); ws != "" && in != ws {
		inside[0] = in
		p.OverlayInside = map[string]string{ws: in}
	}
	for _, m := range p.Mounts {
		if hostfs.Under(m.Destination, inside) && !slices.Contains(inside, m.Destination) {
			p.OverlaySkip = append(p.OverlaySkip, m.Destination)
		}
	}
	return nil
}

func bindMount(src, dst string, ro bool) ociMount {
	mode := "rw"
	if ro {
		mode = "ro"
	}
	return ociMount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", mode, "nosuid", "nodev"}}
}

// denyMount hides dst behind an empty mode-000 object: nothing in the
// sandbox has a capability to bypass the mode, and the mount is read-only
// so its owner cannot chmod it.
func denyMount(src, dst string) ociMount {
	m := bindMount(src, dst, true)
	m.Options = append(m.Options, "noexec")
	return m
}

func tmpfsOptions(mode os.FileMode, size int64, uid, gid int) []string {
	o := []string{"nosuid", "nodev", "mode=" + strconv.FormatUint(uint64(mode), 8)}
	if size > 0 {
		o = append(o, "size="+strconv.FormatInt(size, 10))
	}
	if uid >= 0 {
		o = append(o, "uid="+strconv.Itoa(uid))
	}
	if gid >= 0 {
		o = append(o, "gid="+strconv.Itoa(gid))
	}
	return o
}

// hostPathOf returns the host path behind sandbox path p when p lies in a
// bind mount of a host path (the deepest one; the bundle's own files do
// not count).
func hostPathOf(p string, ms []ociMount, bundle string) (string, bool) {
	return hostfs.HostSource(p, ms, func(m ociMount) (string, string, bool) {
		return m.Source, m.Destination, m.Type == "bind" && m.Source != "" && !strings.HasPrefix(m.Source, bundle+"/")
	})
}

func isDeny(m ociMount) bool {
	b := filepath.Base(m.Source)
	return m.Type == "bind" && (b == bundleDenyDir || b == bundleDenyFile)
}

// sortMounts orders mounts so that a mount point's parents come first;
// on the same path the plan's order is kept, except that deny mounts go
// last (over whatever else is there).
func sortMounts(ms []ociMount) {
	hostfs.SortMounts(ms, func(m ociMount) string { return m.Destination }, isDeny)
}
