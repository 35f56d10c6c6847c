package native

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

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

// placeholder is an empty file the host created in the workspace as the
// mount point for a protected path that did not exist. All placeholders of
// one sandbox are hard links to one inode (creating inodes is what costs on
// ext4; links are cheap), so removal can check that a path is still ours.
type placeholder struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// fsPlan is the filesystem part of a sandbox: the mount plan and the
// Landlock rules matching it.
type fsPlan struct {
	Mounts   []mountOp
	Landlock []llRule
	// Pending are placeholder paths to create (createPlaceholders) before
	// the init mounts them; buildPlan itself changes nothing on the host.
	Pending []string
}

// buildPlan turns a resolved policy into a mount plan. It checks every
// host path it needs (a missing read_only path is ErrInvalid) and lists the
// protected-path placeholders to create; it changes nothing on the host.
//
// hostRoot says the sandbox's uid is host root (a root caller's default):
// without capabilities it still owns root's files, so the root-only
// secrets of the host's system directories are hidden as well.
func buildPlan(pol *policy.Policy, files []sandbox.File, hostRoot bool) (*fsPlan, error) {
	f := pol.Filesystem
	p := &fsPlan{}
	addBind := func(src, dst string, ro bool, field string, optional bool) error {
		fi, err := os.Lstat(src)
		if err != nil {
			if optional && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("%s %s: %w: %v", field, src, sandbox.ErrInvalid, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 && src == dst {
			if target, err := os.Readlink(src); err == nil && topLevel(dst) {
				p.Mounts = append(p.Mounts, mountOp{Kind: opSymlink, Dst: dst, Link: target})
				return nil
			}
			fi, err = os.Stat(src)
			if err != nil {
				return fmt.Errorf("%s %s: %w: %v", field, src, sandbox.ErrInvalid, err)
			}
		}
		p.Mounts = append(p.Mounts, mountOp{Kind: opBind, Src: src, Dst: dst, RO: ro, Dir: fi.IsDir()})
		access := llReadExec
		if !ro {
			access = llReadWrite
		}
		if !fi.IsDir() {
			access &= llFileRights
		}
		p.Landlock = append(p.Landlock, llRule{Access: access, Path: dst})
		return nil
	}

	if f.Rootfs != "" {
		ents, err := os.ReadDir(f.Rootfs)
		if err != nil {
			return nil, fmt.Errorf("rootfs %s: %w: %v", f.Rootfs, sandbox.ErrInvalid, err)
		}
		for _, e := range ents {
			switch e.Name() {
			case "proc", "dev", "sys", "tmp":
				continue
			}
			src := filepath.Join(f.Rootfs, e.Name())
			dst := "/" + e.Name()
			if e.Type()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(src)
				if err != nil {
					return nil, fmt.Errorf("rootfs %s: %w: %v", src, sandbox.ErrInvalid, err)
				}
				p.Mounts = append(p.Mounts, mountOp{Kind: opSymlink, Dst: dst, Link: target})
				continue
			}
			if err := addBind(src, dst, true, "rootfs", false); err != nil {
				return nil, err
			}
		}
	}
	for _, ro := range f.ReadOnly {
		if err := addBind(ro, ro, true, "read_only path", f.Rootfs == "" && isSystemDir(ro)); err != nil {
			return nil, err
		}
	}
	// Fresh kernel filesystems and private tmpfs.
	p.Mounts = append(p.Mounts,
		mountOp{Kind: opProc, Dst: "/proc"},
		mountOp{Kind: opDev, Dst: "/dev", Size: shmSize(int64(pol.Limits.DiskBytes))},
		mountOp{Kind: opTmpfs, Dst: "/tmp", Mode: 0o1777, Size: int64(pol.Limits.DiskBytes)},
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
	for _, t := range f.Tmpfs {
		if t == "/tmp" {
			continue
		}
		p.Mounts = append(p.Mounts, mountOp{Kind: opTmpfs, Dst: t, Mode: 0o755, Size: int64(pol.Limits.DiskBytes)})
		p.Landlock = append(p.Landlock, llRule{Access: llReadWrite, Path: t})
	}
	ws := f.WorkspacePath()
	if ws != "" {
		if err := addBind(ws, ws, false, "workspace", false); err != nil {
			return nil, err
		}
	}
	for _, rw := range f.ReadWrite {
		if err := addBind(rw, rw, false, "read_write path", false); err != nil {
			return nil, err
		}
	}
	for i, file := range files {
		if !filepath.IsAbs(file.Path) || filepath.Clean(file.Path) != file.Path {
			return nil, fmt.Errorf("file %d path %q: %w: not absolute and clean", i, file.Path, sandbox.ErrInvalid)
		}
		mode := file.Mode & 0o777
		if mode == 0 {
			mode = 0o444
		}
		p.Mounts = append(p.Mounts, mountOp{Kind: opFile, Dst: file.Path, Data: file.Data, Mode: mode &^ 0o222})
		p.Landlock = append(p.Landlock, llRule{Access: llRead & llFileRights, Path: file.Path})
	}
	deny := f.Deny
	if hostRoot {
		deny = append(append([]string{}, deny...), rootOnlySecrets()...)
	}
	for _, d := range deny {
		src, ok := hostSource(d, p.Mounts)
		if !ok {
			continue // not visible in the sandbox at all
		}
		fi, err := os.Stat(src)
		if err != nil {
			continue // nothing there to hide
		}
		if fi.IsDir() {
			p.Mounts = append(p.Mounts, mountOp{Kind: opDenyDir, Dst: d})
		} else {
			p.Mounts = append(p.Mounts, mountOp{Kind: opDenyFile, Dst: d})
		}
	}
	sortMounts(p.Mounts)
	if ws != "" {
		ops, pending, err := protectConfig(ws, pol.ProtectedPaths())
		if err != nil {
			return nil, err
		}
		p.Mounts = append(p.Mounts, ops...)
		p.Pending = pending
	}
	// Deny ops must follow every bind that could cover their path,
	// including protected ones inside the workspace.
	sortMounts(p.Mounts)
	return p, nil
}

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
	best := -1
	for i, o := range ops {
		if o.Kind != opBind || !under(path, []string{o.Dst}) {
			continue
		}
		if best < 0 || len(o.Dst) > len(ops[best].Dst) {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	o := ops[best]
	return filepath.Join(o.Src, strings.TrimPrefix(path, o.Dst)), true
}

// shmSize bounds /dev/shm like every other tmpfs (64 MiB when unlimited).
func shmSize(disk int64) int64 {
	if disk > 0 {
		return disk
	}
	return 64 << 20
}

func topLevel(p string) bool { return strings.Count(p, "/") == 1 }

func isSystemDir(p string) bool {
	for _, s := range policy.SystemDirs {
		if s == p {
			return true
		}
	}
	return false
}

// under reports whether path is one of roots or below one.
func under(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || r == "/" || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// sortMounts orders operations so that a mount point's parents come first;
// among operations on the same path the plan's order is kept, except that
// deny operations go after everything else on that path.
func sortMounts(ops []mountOp) {
	rank := func(o mountOp) int {
		if o.Kind == opDenyDir || o.Kind == opDenyFile {
			return 1
		}
		return 0
	}
	sort.SliceStable(ops, func(i, j int) bool {
		di, dj := depth(ops[i].Dst), depth(ops[j].Dst)
		if di != dj {
			return di < dj
		}
		if ops[i].Dst == ops[j].Dst {
			return rank(ops[i]) < rank(ops[j])
		}
		return false
	})
}

// protectConfig returns read-only self-binds for the workspace's protected
// config paths and the placeholders to create for those that do not exist
// yet, and makes each existing anchor directory (.git, .vscode, ...) a mount
// point so it cannot be renamed away. A missing
// path whose parent is missing too gets its topmost missing parent as the
// placeholder: an empty read-only file there blocks creating anything below.
func protectConfig(ws string, paths []string) ([]mountOp, []string, error) {
	var ops []mountOp
	var pending []string
	gitDir := filepath.Join(ws, ".git")
	gi, gerr := os.Lstat(gitDir)
	hasGit := gerr == nil && gi.IsDir()
	// Every existing directory that holds protected entries (.git, .vscode,
	// .claude, ...) becomes a mount point of its own, so it cannot be
	// renamed away and re-created without the protected entries (EBUSY).
	for _, a := range policy.ProtectedConfigAnchors() {
		dir := filepath.Join(ws, a)
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && !behindSymlink(ws, dir) {
			ops = append(ops, mountOp{Kind: opBind, Src: dir, Dst: dir, Dir: true})
		}
	}
	seen := map[string]bool{}
	for _, p := range paths {
		rel, err := filepath.Rel(ws, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		if strings.HasPrefix(rel, ".git/") && !hasGit {
			continue // not a git repository (or a worktree's .git file)
		}
		if coveredBy(p, pending) {
			continue // below a placeholder for a missing parent
		}
		if behindSymlink(ws, p) {
			// Mounts cannot pin a path whose parent is a symlink the
			// sandbox can replace; documented limitation. Never follow it.
			continue
		}
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			// A mount would land on the link's target; the link itself
			// stays in a writable directory. Documented limitation.
			continue
		case err == nil:
			if !seen[p] {
				ops = append(ops, mountOp{Kind: opBind, Src: p, Dst: p, RO: true, Dir: fi.IsDir()})
				seen[p] = true
			}
			continue
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return nil, nil, fmt.Errorf("protect %s: %w", p, err)
		}
		target := topMissing(ws, p)
		if seen[target] {
			continue
		}
		seen[target] = true
		pending = append(pending, target)
		ops = append(ops, mountOp{Kind: opBind, Src: target, Dst: target, RO: true})
	}
	return ops, pending, nil
}

// createPlaceholders creates the pending placeholders; it returns those
// made even on error, for removal.
func createPlaceholders(ws string, pending []string) ([]placeholder, error) {
	var ph []placeholder
	for _, p := range pending {
		made, err := makePlaceholder(ws, p, ph)
		if err != nil {
			return ph, fmt.Errorf("protect %s: create placeholder: %w", p, err)
		}
		ph = append(ph, made)
	}
	return ph, nil
}

func coveredBy(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// behindSymlink reports whether an existing ancestor of p below ws is a
// symlink.
func behindSymlink(ws, p string) bool {
	for d := filepath.Dir(p); len(d) > len(ws); d = filepath.Dir(d) {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// topMissing returns the topmost missing ancestor of p below ws (or p).
func topMissing(ws, p string) string {
	top := p
	for d := filepath.Dir(p); len(d) > len(ws); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		top = d
	}
	return top
}

// makePlaceholder creates an empty file at p, resolving p beneath ws
// without following any symlink (a link planted in the workspace by an
// earlier sandbox must not make the host create files elsewhere): a hard
// link to the first placeholder when there is one, else a new file.
func makePlaceholder(ws, p string, made []placeholder) (placeholder, error) {
	rel, err := filepath.Rel(ws, filepath.Dir(p))
	if err != nil {
		return placeholder{}, err
	}
	parent, err := unix.Openat2(unix.AT_FDCWD, ws, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC})
	if err != nil {
		return placeholder{}, &fs.PathError{Op: "open", Path: ws, Err: err}
	}
	if rel != "." {
		sub, err := unix.Openat2(parent, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		unix.Close(parent)
		if err != nil {
			return placeholder{}, &fs.PathError{Op: "open", Path: filepath.Dir(p), Err: err}
		}
		parent = sub
	}
	defer unix.Close(parent)
	base := filepath.Base(p)
	if len(made) > 0 {
		if err := unix.Linkat(unix.AT_FDCWD, made[0].Path, parent, base, 0); err == nil {
			var st unix.Stat_t
			if err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Ino == made[0].Ino && st.Dev == made[0].Dev {
				return placeholder{Path: p, Dev: st.Dev, Ino: st.Ino}, nil
			}
			// Not our inode (the first placeholder was swapped): undo.
			unix.Unlinkat(parent, base, 0)
			return placeholder{}, &fs.PathError{Op: "link", Path: p, Err: unix.EXDEV}
		}
	}
	fd, err := unix.Openat(parent, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o444)
	if err != nil {
		return placeholder{}, &fs.PathError{Op: "create", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Unlinkat(parent, base, 0)
		return placeholder{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return placeholder{Path: p, Dev: st.Dev, Ino: st.Ino}, nil
}

// removePlaceholders removes the placeholders that are still ours: the same
// inode, still empty (nothing else may have been put there meanwhile).
func removePlaceholders(ph []placeholder) error {
	var errs []error
	for i := len(ph) - 1; i >= 0; i-- {
		p := ph[i]
		var st unix.Stat_t
		if err := unix.Lstat(p.Path, &st); err != nil {
			continue
		}
		if st.Dev != p.Dev || st.Ino != p.Ino || st.Size != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if err := unix.Unlink(p.Path); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, &fs.PathError{Op: "remove placeholder", Path: p.Path, Err: err})
		}
	}
	return errors.Join(errs...)
}
