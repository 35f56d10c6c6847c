package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/mount"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Names inside a sandbox's state directory.
const (
	stateDenyDir  = "deny-dir" // empty mode-000 directory bound over denied directories
	stateDenyFile = "deny-file"
	stateFiles    = "files"   // Spec.Files, one file each
	stateOverlay  = "overlay" // N/upper, N/work: the overlay volumes' layers
)

// mountPlan is the filesystem of one container: its mounts, its tmpfs
// mounts, the files to write into the state directory and, with
// protect_config, the overlays whose changes come back through Sync.
type mountPlan struct {
	Mounts []mount.Mount
	Tmpfs  map[string]string // destination -> mount options
	Files  []sandbox.File    // written to state/files/N, bound read-only at Path
	// Overlays are host directories the container sees through an overlay
	// volume (lower: the host directory; upper and work in the state dir):
	// the host paths are not written while the sandbox runs, and Sync
	// brings the changes back through the guard. SyncSkip are the
	// sandbox's own mounts below them.
	Overlays []string
	SyncSkip []string
}

// planInput is what planMounts needs besides the policy.
type planInput struct {
	Policy *policy.Policy
	// Host: the image is the empty base image and the policy's system
	// directories are bound over it; otherwise the image provides them
	// (a policy with a rootfs drops them the same way).
	Host  bool
	Files []sandbox.File
	Cache []sandbox.Bind
	State string // the sandbox's state directory
	Agent string // the airlock binary on the host
	UID   int    // owner of extra tmpfs mounts (home dirs)
	GID   int
	Guard *policy.ConfigGuard // nil: writes in place, nothing guarded
	Label map[string]string   // labels of the overlay volumes
}

// planMounts turns a resolved policy into the container's mounts with the
// native backend's semantics. It checks every host path it needs (a
// missing read_only, read_write or workspace path is ErrInvalid); it
// changes nothing on the host.
//
// Docker's runtime writes a container's bind mounts straight to the host,
// and its seccomp profile cannot hand a notification descriptor to us (no
// per-write mediation as the native backend has), so with protect_config
// on (or a pinned file in a writable path) every writable host directory
// is mounted as an overlay volume: the host directory is its lower layer,
// the sandbox's writes land in an upper layer in the state directory, and
// Sync writes them back decided by the guard, as the gVisor backend does.
// Writable host files (not directories) cannot be overlaid: they are bound
// read-write only when the guard would allow writing them, else read-only.
func planMounts(in planInput) (*mountPlan, error) {
	f := in.Policy.Filesystem
	p := &mountPlan{Tmpfs: map[string]string{}}
	var hostBinds []mount.Mount // binds of host paths (for the mount point check)
	bind := func(src, dst string, ro bool, what string, optional bool) error {
		fi, err := os.Lstat(src)
		if err != nil {
			if optional && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// A symlink (merged-/usr /bin): bind what it names, as the
			// mount would follow it anyway.
			if src, err = filepath.EvalSymlinks(src); err != nil {
				return fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
			}
		}
		m := bindMount(src, dst, ro)
		p.add(m)
		hostBinds = append(hostBinds, m)
		return nil
	}

	for _, ro := range f.ReadOnly {
		if !in.Host && hostfs.IsSystemDir(ro) {
			continue // the image's own
		}
		if err := bind(ro, ro, true, "read_only path", in.Host && hostfs.IsSystemDir(ro)); err != nil {
			return nil, err
		}
	}
	disk := int64(in.Policy.Limits.DiskBytes)
	p.Tmpfs["/tmp"] = tmpfsOptions(0o1777, disk, -1, -1)
	for _, t := range f.Tmpfs {
		if t != "/tmp" {
			p.Tmpfs[t] = tmpfsOptions(0o755, disk, in.UID, in.GID)
		}
	}
	ws := f.WorkspacePath()
	var roots []string // writable host paths
	if ws != "" {
		if !filepath.IsAbs(ws) {
			return nil, fmt.Errorf("workspace %q: %w: not absolute", ws, sandbox.ErrInvalid)
		}
		roots = append(roots, ws)
	}
	roots = append(roots, f.ReadWrite...)
	protect := in.Guard != nil && (in.Guard.Config || pinnedUnder(in.Guard, roots))
	for i, r := range roots {
		what := "read_write path"
		if i == 0 && ws != "" {
			what = "workspace"
		}
		fi, err := os.Stat(r)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %v", what, r, sandbox.ErrInvalid, err)
		}
		switch {
		case !protect:
			err = bind(r, r, false, what, false)
		case fi.IsDir():
			err = p.overlay(in, r)
		default:
			d := in.Guard.Check(policy.OpWrite, hostfs.Dir(filepath.Dir(r)), filepath.Base(r))
			err = bind(r, r, d != nil, what, false)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, c := range in.Cache {
		if err := bind(c.Src, c.Dst, c.ReadOnly, "cache", false); err != nil {
			return nil, err
		}
	}
	for i, file := range in.Files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path || file.Path == "/" {
			return nil, fmt.Errorf("file %d path %q: %w: not absolute and clean", i, file.Path, sandbox.ErrInvalid)
		}
		p.Files = append(p.Files, file)
		p.add(bindMount(filepath.Join(in.State, stateFiles, strconv.Itoa(i)), file.Path, true))
	}
	p.add(bindMount(in.Agent, AgentPath, true))
	for _, d := range f.Deny {
		if !hostfs.Under(d, dsts(hostBinds)) && !hostfs.Under(d, p.Overlays) {
			continue // not visible in the sandbox at all
		}
		fi, err := os.Stat(d)
		if err != nil {
			continue // nothing there to hide
		}
		src := filepath.Join(in.State, stateDenyFile)
		if fi.IsDir() {
			src = filepath.Join(in.State, stateDenyDir)
		}
		p.add(bindMount(src, d, true))
	}
	if in.Guard != nil {
		for path := range in.Guard.Pinned {
			if hostfs.Under(path, roots) {
				if _, err := os.Lstat(path); err == nil {
					p.add(bindMount(path, path, true))
				}
			}
		}
	}
	if err := p.checkMountPoints(hostBinds); err != nil {
		return nil, err
	}
	for _, m := range p.Mounts {
		if hostfs.Under(m.Target, p.Overlays) && !slices.Contains(p.Overlays, m.Target) {
			p.SyncSkip = append(p.SyncSkip, m.Target)
		}
	}
	for t := range p.Tmpfs {
		if hostfs.Under(t, p.Overlays) && !slices.Contains(p.Overlays, t) {
			p.SyncSkip = append(p.SyncSkip, t)
		}
	}
	return p, nil
}

// add appends m, replacing an earlier mount at the same target (Docker
// refuses two; the later one, a deny or pinned bind, is the stronger).
func (p *mountPlan) add(m mount.Mount) {
	p.Mounts = slices.DeleteFunc(p.Mounts, func(o mount.Mount) bool { return o.Target == m.Target })
	delete(p.Tmpfs, m.Target)
	p.Mounts = append(p.Mounts, m)
}

// overlay mounts host directory dir through an overlay volume (see
// planMounts). The layer directories are made by the caller.
func (p *mountPlan) overlay(in planInput, dir string) error {
	// The options are one comma-separated string: a path holding a comma
	// or a colon cannot be written into it.
	if strings.ContainsAny(dir, ",:") || strings.ContainsAny(in.State, ",:") {
		return fmt.Errorf("writable path %q: %w: it holds a comma or colon, which an overlay's options cannot carry; rename it or turn protect_config off", dir, sandbox.ErrInvalid)
	}
	n := strconv.Itoa(len(p.Overlays))
	layer := filepath.Join(in.State, stateOverlay, n)
	opts := "lowerdir=" + dir + ",upperdir=" + layer + "/upper,workdir=" + layer + "/work"
	p.Overlays = append(p.Overlays, dir)
	p.add(mount.Mount{
		Type: mount.TypeVolume, Target: dir,
		VolumeOptions: &mount.VolumeOptions{
			NoCopy: true, // never copy the image's files into it
			Labels: in.Label,
			DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{
				"type": "overlay", "device": "overlay", "o": opts,
			}},
		},
	})
	return nil
}

// checkMountPoints refuses a mount whose mount point is missing inside a
// host directory bound into the container: the runtime would create it
// there, on the host.
func (p *mountPlan) checkMountPoints(hostBinds []mount.Mount) error {
	targets := make([]string, 0, len(p.Mounts)+len(p.Tmpfs))
	for _, m := range p.Mounts {
		if !slices.ContainsFunc(hostBinds, func(h mount.Mount) bool { return h.Target == m.Target && h.Source == m.Source }) {
			targets = append(targets, m.Target)
		}
	}
	for t := range p.Tmpfs {
		targets = append(targets, t)
	}
	slices.Sort(targets)
	for _, t := range targets {
		src, ok := hostfs.HostSource(t, hostBinds, func(m mount.Mount) (string, string, bool) { return m.Source, m.Target, true })
		if !ok {
			continue
		}
		if _, err := os.Lstat(src); err != nil {
			return fmt.Errorf("mount point %s: %w: it does not exist in the host directory mounted there (%s), and mounting there would create it on the host", t, sandbox.ErrInvalid, src)
		}
	}
	return nil
}

func pinnedUnder(g *policy.ConfigGuard, roots []string) bool {
	for path := range g.Pinned {
		if hostfs.Under(path, roots) {
			if _, err := os.Lstat(path); err == nil {
				return true
			}
		}
	}
	return false
}

func dsts(ms []mount.Mount) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Target
	}
	return out
}

func bindMount(src, dst string, ro bool) mount.Mount {
	return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: ro,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}}
}

// tmpfsOptions are Docker tmpfs options; "exec" is explicit because
// Docker's own default for a tmpfs is noexec.
func tmpfsOptions(mode os.FileMode, size int64, uid, gid int) string {
	o := []string{"rw", "exec", "nosuid", "nodev", "mode=" + strconv.FormatUint(uint64(mode), 8)}
	if size > 0 {
		o = append(o, "size="+strconv.FormatInt(size, 10))
	}
	if uid >= 0 {
		o = append(o, "uid="+strconv.Itoa(uid))
	}
	if gid >= 0 {
		o = append(o, "gid="+strconv.Itoa(gid))
	}
	return strings.Join(o, ",")
}
