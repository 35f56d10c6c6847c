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
// that directory, and every other host path bound in (read_write and
// read_only paths, caches), through idmapped binds: the sandbox's process
// id (host id lease+uid) stands for the invoking user there, so what it
// writes (itself or through the write mediator, which acts with its ids
// through the sandbox's own mounts) lands owned by that user. The mapping
// is one id wide: every other owner, a host user's file included, stays
// unmapped inside (shown as the overflow id, no capability of the
// sandbox's root reaches it), and no other sandbox id can own a file
// there. The host makes the binds (the init, a range id, could not even
// reach a path under a directory only the caller may enter).

// mappedBinds idmaps the host binds of p's plan (if it needs them) and
// turns their plan steps into opMapped; the descriptors go after the
// image layers in st.mapped, in plan order.
func mappedBinds(p *prepared, st *started, plan *fsPlan) error {
	if p.lease == nil || p.spec.OwnWorkspace {
		return nil
	}
	var binds []int
	for i, op := range plan.Mounts {
		if op.Kind == opBind {
			binds = append(binds, i)
		}
	}
	if len(binds) == 0 {
		return nil
	}
	if len(st.mapped)+len(binds) > maxMapped {
		return fmt.Errorf("%d image layers and %d host paths, at most %d with a host id range: %w", len(st.mapped)-1, len(binds), maxMapped-1, sandbox.ErrLimit)
	}
	c := hostCreds(p)
	ns, err := oneIDUserns(os.Getuid(), os.Getgid(), c.UID, c.GID)
	if err != nil {
		return err
	}
	defer ns.Close()
	for _, i := range binds {
		op := &plan.Mounts[i]
		fd, err := idmappedBind(op.Src, ns)
		if err != nil {
			return fmt.Errorf("bind %s: %w", op.Src, err)
		}
		st.mapped = append(st.mapped, fd)
		op.Kind, op.Src = opMapped, ""
	}
	return nil
}

// idmappedBind clones the mount tree at path, detached, idmapped through
// ns.
func idmappedBind(path string, ns *os.File) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return nil, fmt.Errorf("clone mount: %v: %w", err, sandbox.ErrUnavailable)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("idmapped mount (Linux 5.12+ and a filesystem that supports it, such as ext4, xfs, btrfs or tmpfs): %v: %w", err, sandbox.ErrUnavailable)
	}
	return os.NewFile(uintptr(fd), "bind"), nil
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
