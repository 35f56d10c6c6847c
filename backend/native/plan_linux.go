package native

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Mount operation kinds the init understands.
const (
	opBind     = "bind"     // bind Src (host path) at Dst, recursively
	opTmpfs    = "tmpfs"    // fresh tmpfs at Dst
	opProc     = "proc"     // fresh procfs at Dst plus masks
	opDev      = "dev"      // minimal /dev at Dst
	opSymlink  = "symlink"  // symlink Dst -> Link
	opFile     = "file"     // read-only file with Data at Dst
	opDenyDir  = "denydir"  // empty inaccessible tmpfs over a directory
	opDenyFile = "denyfile" // empty inaccessible file over a file
	opMapped   = "mapped"   // attach at Dst the next idmapped bind the host sent (mapws_linux.go); RO, Dir as bind
)

// mountOp is one step of the root filesystem plan, computed on the host and
// executed by the init in order.
type mountOp struct {
	Kind string `json:"k"`
	Src  string `json:"s,omitempty"`
	Dst  string `json:"d"`
	RO   bool   `json:"ro,omitempty"`
	Dir  bool   `json:"dir,omitempty"` // bind: source is a directory
	Mode uint32 `json:"m,omitempty"`
	Size int64  `json:"z,omitempty"` // tmpfs size in bytes (0: kernel default)
	Data []byte `json:"b,omitempty"`
	Link string `json:"l,omitempty"`
}

// fsPlan is the filesystem part of a sandbox: the mount plan and the
// Landlock rules matching it.
type fsPlan struct {
	Mounts   []mountOp
	Landlock []llRule
	// Mediated are the host-backed writable binds (workspace, read_write
	// paths, caches): their Landlock rules grant no write right, so every
	// write there goes through the host's write mediator (fsguard).
	// Private are the sandbox's own mounts below them (tmpfs, files,
	// deny masks), which are not.
	Mediated []string
	Private  []string
}

// buildPlan turns a resolved policy into a mount plan. It checks every
// host path it needs (a missing read_only path is ErrInvalid); it changes
// nothing on the host.
//
// hostRoot says the sandbox's uid is host root (a root caller's default):
// without capabilities it still owns root's files, so the root-only
// secrets of the host's system directories are hidden as well. mediate
// says writes to host-backed writable binds go through the host's write
// mediator (Landlock grants none there); without it they are direct.
func buildPlan(pol *policy.Policy, files []sandbox.File, caches []sandbox.Bind, hostRoot, mediate bool) (*fsPlan, error) {
	pl := &planner{pol: pol, mediate: mediate, p: &fsPlan{}}
	for _, stage := range []func() error{
		pl.rootfs,
		pl.readOnly,
		pl.kernelAndTmp,
		func() error { return pl.writable(caches) },
		func() error { return pl.files(files) },
		func() error { return pl.deny(hostRoot) },
	} {
		if err := stage(); err != nil {
			return nil, err
		}
	}
	p := pl.p
	if pol.Filesystem.Image != "" {
		pl.imageRoot()
	}
	sortMounts(p.Mounts)
	for _, m := range p.Mounts {
		if m.Kind != opBind && m.Kind != opSymlink && hostfs.Under(m.Dst, p.Mediated) {
			p.Private = append(p.Private, m.Dst)
		}
	}
	return p, nil
}

// planner builds one fsPlan, stage by stage.
type planner struct {
	pol     *policy.Policy
	mediate bool
	p       *fsPlan
}

// bind adds a host bind (and its Landlock rule). optional skips a missing
// source; a top-level symlink bound onto itself becomes a symlink.
func (pl *planner) bind(src, dst string, ro bool, field string, optional bool) error {
	p := pl.p
	fi, err := os.Lstat(src)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s %s: %w: %v", field, src, sandbox.ErrInvalid, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 && src == dst {
		if target, err := os.Readlink(src); err == nil && hostfs.TopLevel(dst) {
			p.Mounts = append(p.Mounts, mountOp{Kind: opSymlink, Dst: dst, Link: target})
			return nil
		}
		if fi, err = os.Stat(src); err != nil {
			return fmt.Errorf("%s %s: %w: %v", field, src, sandbox.ErrInvalid, err)
		}
	}
	p.Mounts = append(p.Mounts, mountOp{Kind: opBind, Src: src, Dst: dst, RO: ro, Dir: fi.IsDir()})
	access := llReadExec
	switch {
	case !ro && pl.mediate:
		access = llMediated
		p.Mediated = append(p.Mediated, dst)
	case !ro:
		access = llReadWrite
	}
	if !fi.IsDir() {
		access &= llFileRights
	}
	p.Landlock = append(p.Landlock, llRule{Access: access, Path: dst})
	return nil
}

// imageRoot gives the image's overlay root its Landlock rules: read and
// execute everywhere, and write everywhere too when no mediated mount is
// there (host-backed writable binds without mediation are writable
// anyway). With one (the workspace), write rights go
// beneath every entry of the root except those holding such a mount
// (only the mediator writes there: a right on an ancestor would let a
// call it continued land there) and the sandbox's kernel filesystems
// (their own rules): the root directory itself then takes no new entry.
func (pl *planner) imageRoot() {
	if len(pl.p.Mediated) == 0 {
		pl.p.Landlock = append(pl.p.Landlock, llRule{Access: llReadWrite, Path: "/"})
		return
	}
	except := append([]string{"/proc", "/dev", "/sys"}, pl.p.Mediated...)
	pl.p.Landlock = append(pl.p.Landlock,
		llRule{Access: llReadExec, Path: "/"},
		llRule{Access: llReadWrite, Path: "/", Children: true, Except: except},
	)
}

// rootfs binds a root directory's top-level entries read-only (its symlinks as
// symlinks), leaving out what the sandbox gets fresh.
func (pl *planner) rootfs() error {
	root := pl.pol.Filesystem.Rootfs
	if root == "" {
		return nil
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("rootfs %s: %w: %v", root, sandbox.ErrInvalid, err)
	}
	for _, e := range ents {
		switch e.Name() {
		case "proc", "dev", "sys", "tmp":
			continue
		}
		src, dst := filepath.Join(root, e.Name()), "/"+e.Name()
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				return fmt.Errorf("rootfs %s: %w: %v", src, sandbox.ErrInvalid, err)
			}
			pl.p.Mounts = append(pl.p.Mounts, mountOp{Kind: opSymlink, Dst: dst, Link: target})
			continue
		}
		if err := pl.bind(src, dst, true, "rootfs", false); err != nil {
			return err
		}
	}
	return nil
}

func (pl *planner) readOnly() error {
	f := pl.pol.Filesystem
	for _, ro := range f.ReadOnly {
		if err := pl.bind(ro, inside(&f, ro), true, "read_only path", f.Rootfs == "" && hostfs.IsSystemDir(ro)); err != nil {
			return err
		}
	}
	return nil
}

// kernelAndTmp adds fresh procfs, /dev and the private tmpfs mounts.
func (pl *planner) kernelAndTmp() error {
	p, disk := pl.p, int64(pl.pol.Limits.DiskBytes)
	p.Mounts = append(p.Mounts,
		mountOp{Kind: opProc, Dst: "/proc"},
		mountOp{Kind: opDev, Dst: "/dev", Size: shmSize(disk)},
		mountOp{Kind: opTmpfs, Dst: "/tmp", Mode: 0o1777, Size: disk},
	)
	p.Landlock = append(p.Landlock,
		llRule{Access: llRead, Path: "/proc"},
		llRule{Access: llReadWrite, Path: "/tmp"},
		llRule{Access: llReadWrite, Path: "/dev/shm"},
		llRule{Access: llDevRights, Path: "/dev/pts"},
	)
	for _, d := range devNodes {
		p.Landlock = append(p.Landlock, llRule{Access: llDevRights &^ llReadDir, Path: "/dev/" + d})
	}
	for _, t := range pl.pol.Filesystem.Tmpfs {
		if t == "/tmp" {
			continue
		}
		p.Mounts = append(p.Mounts, mountOp{Kind: opTmpfs, Dst: t, Mode: 0o755, Size: disk})
		p.Landlock = append(p.Landlock, llRule{Access: llReadWrite, Path: t})
	}
	return nil
}

// writable binds the workspace, read_write paths and caches.
func (pl *planner) writable(caches []sandbox.Bind) error {
	f := pl.pol.Filesystem
	if ws := f.WorkspacePath(); ws != "" {
		if err := pl.bind(ws, f.WorkspaceInside(), false, "workspace", false); err != nil {
			return err
		}
	}
	for _, rw := range f.ReadWrite {
		if err := pl.bind(rw, inside(&f, rw), false, "read_write path", false); err != nil {
			return err
		}
	}
	for _, c := range caches {
		if err := pl.bind(c.Src, c.Dst, c.ReadOnly, "cache", false); err != nil {
			return err
		}
	}
	return nil
}

// files adds the host-made read-only files (Spec.Files).
func (pl *planner) files(files []sandbox.File) error {
	for i, file := range files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path {
			return fmt.Errorf("file %d path %q: %w: not absolute and clean", i, file.Path, sandbox.ErrInvalid)
		}
		mode := file.Mode & 0o777
		if mode == 0 {
			mode = 0o444
		}
		pl.p.Mounts = append(pl.p.Mounts, mountOp{Kind: opFile, Dst: file.Path, Data: file.Data, Mode: mode &^ 0o222})
		pl.p.Landlock = append(pl.p.Landlock, llRule{Access: llRead & llFileRights, Path: file.Path})
	}
	return nil
}

// deny masks the policy's denied paths that are visible (and, for a
// sandbox that is host root, root's own secrets).
func (pl *planner) deny(hostRoot bool) error {
	deny := pl.pol.Filesystem.Deny
	if hostRoot {
		deny = append(append([]string{}, deny...), rootOnlySecrets()...)
	}
	for _, d := range deny {
		d = inside(&pl.pol.Filesystem, d)
		src, ok := hostSource(d, pl.p.Mounts)
		if !ok {
			continue // not visible in the sandbox at all
		}
		fi, err := os.Stat(src)
		if err != nil {
			continue // nothing there to hide
		}
		kind := opDenyFile
		if fi.IsDir() {
			kind = opDenyDir
		}
		pl.p.Mounts = append(pl.p.Mounts, mountOp{Kind: kind, Dst: d})
	}
	return nil
}

// inside is where host path p shows in the sandbox (hostfs.Inside).
func inside(f *policy.Filesystem, p string) string { return hostfs.Inside(f, p) }

// rootOnlySecrets are host files only root may read that a sandbox running
// as host root (no capabilities, but the owner) must not see either.
func rootOnlySecrets() []string {
	out := []string{"/etc/ssl/private", "/etc/security/opasswd", "/etc/.pwd.lock"}
	keys, _ := filepath.Glob("/etc/ssh/ssh_host_*key")
	return append(out, keys...)
}

// hostSource maps a path inside the sandbox to the host path the deepest
// bind covering it shows there.
func hostSource(path string, ops []mountOp) (string, bool) {
	return hostfs.HostSource(path, ops, func(o mountOp) (string, string, bool) {
		return o.Src, o.Dst, o.Kind == opBind
	})
}

// shmSize bounds /dev/shm like every other tmpfs (64 MiB when unlimited).
func shmSize(disk int64) int64 {
	if disk > 0 {
		return disk
	}
	return 64 << 20
}

// sortMounts orders operations so that a mount point's parents come first;
// among operations on the same path the plan's order is kept, except that
// deny operations go after everything else on that path.
func sortMounts(ops []mountOp) {
	hostfs.SortMounts(ops, func(o mountOp) string { return o.Dst },
		func(o mountOp) bool { return o.Kind == opDenyDir || o.Kind == opDenyFile })
}
