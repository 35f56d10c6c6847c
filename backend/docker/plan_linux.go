package docker

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/mount"

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
	// Inside maps an overlaid host directory to where the sandbox sees
	// it, when not at its host path (the workspace's workspace_mount).
	Inside map[string]string
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
	b := &mountPlanner{in: in, f: &f, p: &mountPlan{Tmpfs: map[string]string{}}}
	for _, ro := range f.ReadOnly {
		if !in.Host && hostfs.IsSystemDir(ro) {
			continue // the image's own
		}
		if err := b.bind(ro, ro, true, "read_only path", in.Host && hostfs.IsSystemDir(ro)); err != nil {
			return nil, err
		}
	}
	disk := int64(in.Policy.Limits.DiskBytes)
	b.p.Tmpfs["/tmp"] = tmpfsOptions(0o1777, disk, -1, -1)
	for _, t := range f.Tmpfs {
		if t != "/tmp" {
			b.p.Tmpfs[t] = tmpfsOptions(0o755, disk, in.UID, in.GID)
		}
	}
	roots, err := b.writable()
	if err != nil {
		return nil, err
	}
	for _, c := range in.Cache {
		if err := b.bind(c.Src, c.Dst, c.ReadOnly, "cache", false); err != nil {
			return nil, err
		}
	}
	for i, file := range in.Files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path || file.Path == "/" {
			return nil, fmt.Errorf("file %d path %q: %w: not absolute and clean", i, file.Path, sandbox.ErrInvalid)
		}
		b.p.Files = append(b.p.Files, file)
		b.p.add(bindMount(filepath.Join(in.State, stateFiles, strconv.Itoa(i)), file.Path, true))
	}
	b.p.add(bindMount(in.Agent, AgentPath, true))
	b.deny()
	b.pinned(roots)
	if err := b.p.checkMountPoints(b.hostBinds); err != nil {
		return nil, err
	}
	b.p.syncSkip()
	return b.p, nil
}

// mountPlanner is planMounts' state between its stages.
type mountPlanner struct {
	in        planInput
	f         *policy.Filesystem
	p         *mountPlan
	hostBinds []mount.Mount // binds of host paths (for the mount point check)
}

// bind binds host path src at dst (a symlink: what it names); optional
// skips a src that does not exist.
func (b *mountPlanner) bind(src, dst string, ro bool, what string, optional bool) error {
	fi, err := hostfs.LstatSource(src, what, optional)
	if err != nil || fi == nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// A symlink (merged-/usr /bin): bind what it names, as the
		// mount would follow it anyway.
		if src, err = filepath.EvalSymlinks(src); err != nil {
			return fmt.Errorf("%s %s: %w: %v", what, src, sandbox.ErrInvalid, err)
		}
	}
	m := bindMount(src, dst, ro)
	b.p.add(m)
	b.hostBinds = append(b.hostBinds, m)
	return nil
}

// writable mounts the workspace and the read_write paths: bound, or with
// protection on an overlay (a directory) or bound read-only where the
// guard refuses writing it (a file). It returns those host paths.
func (b *mountPlanner) writable() (roots []string, err error) {
	in, f := b.in, b.f
	ws := f.WorkspacePath()
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
		dst := f.Inside(r)
		fi, err := os.Stat(r)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w: %v", what, r, sandbox.ErrInvalid, err)
		}
		switch {
		case !protect:
			err = b.bind(r, dst, false, what, false)
		case fi.IsDir():
			err = b.p.overlay(in, r, dst)
		default:
			d := in.Guard.Check(policy.OpWrite, hostfs.Dir(filepath.Dir(r)), filepath.Base(r))
			err = b.bind(r, dst, d != nil, what, false)
		}
		if err != nil {
			return nil, err
		}
	}
	return roots, nil
}

// deny covers the deny paths visible in the sandbox that exist.
func (b *mountPlanner) deny() {
	for _, d := range b.f.Deny {
		if !hostfs.Under(d, srcs(b.hostBinds)) && !hostfs.Under(d, b.p.Overlays) {
			continue // not visible in the sandbox at all
		}
		fi, err := os.Stat(d)
		if err != nil {
			continue // nothing there to hide
		}
		src := filepath.Join(b.in.State, stateDenyFile)
		if fi.IsDir() {
			src = filepath.Join(b.in.State, stateDenyDir)
		}
		b.p.add(bindMount(src, b.f.Inside(d), true))
	}
}

// pinned binds the pinned files in the writable paths read-only.
func (b *mountPlanner) pinned(roots []string) {
	if b.in.Guard == nil {
		return
	}
	for path := range b.in.Guard.Pinned {
		if hostfs.Under(path, roots) {
			if _, err := os.Lstat(path); err == nil {
				b.p.add(bindMount(path, b.f.Inside(path), true))
			}
		}
	}
}

// syncSkip lists the sandbox's own mounts below the overlays: Sync leaves
// them alone.
func (p *mountPlan) syncSkip() {
	inside := make([]string, len(p.Overlays)) // the overlays' inside paths
	for i, o := range p.Overlays {
		inside[i] = o
		if in, ok := p.Inside[o]; ok {
			inside[i] = in
		}
	}
	for _, m := range p.Mounts {
		if hostfs.Under(m.Target, inside) && !slices.Contains(inside, m.Target) {
			p.SyncSkip = append(p.SyncSkip, m.Target)
		}
	}
	for t := range p.Tmpfs {
		if hostfs.Under(t, inside) && !slices.Contains(inside, t) {
			p.SyncSkip = append(p.SyncSkip, t)
		}
	}
}

// add appends m, replacing an earlier mount at the same target (Docker
// refuses two; the later one, a deny or pinned bind, is the stronger).
func (p *mountPlan) add(m mount.Mount) {
	p.Mounts = slices.DeleteFunc(p.Mounts, func(o mount.Mount) bool { return o.Target == m.Target })
	delete(p.Tmpfs, m.Target)
	p.Mounts = append(p.Mounts, m)
}

// overlay mounts host directory dir at dst through an overlay volume (see
// planMounts). The layer directories are made by the caller.
func (p *mountPlan) overlay(in planInput, dir, dst string) error {
	// The options are one comma-separated string: a path holding a comma
	// or a colon cannot be written into it.
	if strings.ContainsAny(dir, ",:") || strings.ContainsAny(in.State, ",:") {
		return fmt.Errorf("writable path %q: %w: it holds a comma or colon, which an overlay's options cannot carry; rename it or turn protect_config off", dir, sandbox.ErrInvalid)
	}
	n := strconv.Itoa(len(p.Overlays))
	layer := filepath.Join(in.State, stateOverlay, n)
	opts := "lowerdir=" + dir + ",upperdir=" + layer + "/upper,workdir=" + layer + "/work"
	p.Overlays = append(p.Overlays, dir)
	if dst != dir {
		if p.Inside == nil {
			p.Inside = map[string]string{}
		}
		p.Inside[dir] = dst
	}
	p.add(mount.Mount{
		Type: mount.TypeVolume, Target: dst,
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

// srcs returns the host sources of binds.
func srcs(ms []mount.Mount) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Source
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
