package gvisor

import (
	"errors"
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
	p := &mountPlan{Links: map[string]string{}}
	var binds []string // destinations of host binds: deny paths outside them are moot
	bind := func(src, dst string, ro bool, what string, optional bool) error {
		fi, err := os.Lstat(src)
		if err != nil {
			if optional && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err := os.Readlink(src); err == nil && hostfs.TopLevel(dst) {
				p.Links[dst[1:]] = target
				return nil
			}
			if _, err := os.Stat(src); err != nil {
				return fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
			}
		}
		p.Mounts = append(p.Mounts, bindMount(src, dst, ro))
		binds = append(binds, dst)
		return nil
	}

	if in.Rootfs != "" {
		ents, err := os.ReadDir(in.Rootfs)
		if err != nil {
			return nil, fmt.Errorf("rootfs %s: %w: %v", in.Rootfs, sandbox.ErrInvalid, err)
		}
		for _, e := range ents {
			switch e.Name() {
			case "proc", "dev", "sys", "tmp", ".airlock":
				continue
			}
			if err := bind(filepath.Join(in.Rootfs, e.Name()), "/"+e.Name(), true, "rootfs", false); err != nil {
				return nil, err
			}
		}
	}
	for _, ro := range f.ReadOnly {
		if err := bind(ro, hostfs.Inside(&f, ro), true, "read_only path", in.Rootfs == "" && hostfs.IsSystemDir(ro)); err != nil {
			return nil, err
		}
	}
	disk := int64(in.Policy.Limits.DiskBytes)
	p.Mounts = append(p.Mounts,
		ociMount{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		ociMount{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755", "size=65536k"}},
		ociMount{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: tmpfsOptions(01777, disk, -1, -1)},
		ociMount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: tmpfsOptions(01777, disk, -1, -1)},
	)
	for _, t := range f.Tmpfs {
		if t == "/tmp" {
			continue
		}
		p.Mounts = append(p.Mounts, ociMount{Destination: t, Type: "tmpfs", Source: "tmpfs", Options: tmpfsOptions(0o755, disk, in.UID, in.GID)})
	}
	ws := f.WorkspacePath()
	if ws != "" {
		if !filepath.IsAbs(ws) {
			return nil, fmt.Errorf("workspace %q: %w: not absolute", ws, sandbox.ErrInvalid)
		}
		if err := bind(ws, f.WorkspaceInside(), false, "workspace", false); err != nil {
			return nil, err
		}
	}
	for _, rw := range f.ReadWrite {
		if err := bind(rw, hostfs.Inside(&f, rw), false, "read_write path", false); err != nil {
			return nil, err
		}
	}
	for i, file := range in.Files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path || file.Path == "/" {
			return nil, fmt.Errorf("file %d path %q: %w: not absolute and clean", i, file.Path, sandbox.ErrInvalid)
		}
		p.Files = append(p.Files, file)
		p.Mounts = append(p.Mounts, bindMount(filepath.Join(in.Bundle, bundleFiles, strconv.Itoa(i)), file.Path, true))
	}
	// gVisor creates a missing mount point through the gofer, that is on
	// the host: never let that happen inside a host directory.
	for _, m := range p.Mounts {
		if m.Type == "bind" && !strings.HasPrefix(m.Source, in.Bundle+"/") {
			continue // a host path at the same place: it exists
		}
		if src, ok := hostPathOf(m.Destination, p.Mounts, in.Bundle); ok {
			if _, err := os.Lstat(src); err != nil {
				return nil, fmt.Errorf("mount point %s: %w: it does not exist in the host directory mounted there (%s), and mounting there would create it on the host", m.Destination, sandbox.ErrInvalid, src)
			}
		}
	}
	p.Mounts = append(p.Mounts, bindMount("", AgentPath, true)) // source filled in by the caller
	for _, d := range f.Deny {
		if !hostfs.Under(hostfs.Inside(&f, d), binds) {
			continue // not visible in the sandbox at all
		}
		fi, err := os.Stat(d)
		if err != nil {
			continue // nothing there to hide
		}
		if in.Unmapped && fi.Mode().Perm()&0o004 == 0 {
			// Host ids of its own: what others may not read stays
			// unreadable anyway (and runsc's gofer, one of those ids,
			// could not open it to cover it).
			continue
		}
		src := filepath.Join(in.Bundle, bundleDenyFile)
		if fi.IsDir() {
			src = filepath.Join(in.Bundle, bundleDenyDir)
		}
		p.Mounts = append(p.Mounts, denyMount(src, hostfs.Inside(&f, d)))
	}
	if err := p.protect(in, ws); err != nil {
		return nil, err
	}
	sortMounts(p.Mounts)
	return p, nil
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
