package native

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/sandbox"
)

// A sandbox with a host id range whose workspace is a host directory it
// was not made for (`airlock run --image` in the caller's directory) sees
// that directory through an idmapped bind: the sandbox's process id (host
// id lease+uid) stands for the invoking user there, so what it writes
// (itself or through the write mediator, which acts with its ids through
// the sandbox's own mounts) lands owned by that user. The mapping is one
// id wide: every other owner, a host user's file included, stays unmapped
// inside (shown as the overflow id, no capability of the sandbox's root
// reaches it), and no other sandbox id can own a file there.

// mappedWorkspace idmaps the workspace bind of p (if it needs one) and
// turns its plan step into opMapped; the descriptor goes after the image
// layers in st.mapped.
func mappedWorkspace(p *prepared, st *started, plan *fsPlan) error {
	ws := p.pol.Filesystem.WorkspacePath()
	if p.lease == nil || p.spec.OwnWorkspace || ws == "" {
		return nil
	}
	i := -1
	for j, op := range plan.Mounts {
		if op.Kind == opBind && op.Src == ws && op.Dir {
			i = j
			break
		}
	}
	if i < 0 {
		return nil
	}
	c := hostCreds(p)
	fd, err := idmappedBind(ws, os.Getuid(), os.Getgid(), c.UID, c.GID)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", ws, err)
	}
	st.mapped = append(st.mapped, fd)
	plan.Mounts[i].Kind, plan.Mounts[i].Src = opMapped, ""
	return nil
}

// idmappedBind clones the mount tree at dir, detached, idmapped so that
// disk ids uid/gid appear as host ids asUID/asGID and nothing else is
// mapped.
func idmappedBind(dir string, uid, gid, asUID, asGID int) (*os.File, error) {
	ns, err := oneIDUserns(uid, gid, asUID, asGID)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return nil, fmt.Errorf("clone mount: %v: %w", err, sandbox.ErrUnavailable)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("idmapped mount (Linux 5.12+ and a filesystem that supports it, such as ext4, xfs, btrfs or tmpfs): %v: %w", err, sandbox.ErrUnavailable)
	}
	return os.NewFile(uintptr(fd), "workspace"), nil
}

// oneIDUserns makes a user namespace mapping uid/gid (inside) onto host
// asUID/asGID, one id wide, and returns it open. A child of ours made in
// it stops at its exec (traced) without running anything, lives until
// the namespace is open and is then killed.
func oneIDUserns(uid, gid, asUID, asGID int) (*os.File, error) {
	// The tracer is a thread: keep this one while the child lives.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: asUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: asGID, Size: 1}},
		Ptrace:      true,
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("user namespace for the workspace: %v: %w", err, sandbox.ErrUnavailable)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("user namespace for the workspace: %v: %w", err, sandbox.ErrUnavailable)
	}
	return ns, nil
}
