package fsguard

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Creds are the host credentials the sandbox's processes have: the
// mediator acts with these on its own thread and nothing more.
type Creds struct {
	UID, GID int
	Groups   []int // supplementary groups (root hosts only; rootless keeps its own)
	// Root, when set, is the range over whose files the sandbox's root
	// holds capabilities (see Range); nil: none.
	Root *Range
}

// prepareThread gives the calling OS thread (locked to its goroutine for
// good: it must die with it) the sandbox's file-system credentials: its
// own umask of 0 (modes are computed from the caller's umask), the
// sandbox's fsuid, fsgid and groups, and no effective capabilities. Its
// euid stays the host's, which owns the sandbox's user namespace: that is
// what lets it read the sandbox's /proc entries, never host files.
func prepareThread(c Creds) error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare fs: %w", err)
	}
	unix.Umask(0)
	if os.Geteuid() == 0 {
		groups := make([]uint32, len(c.Groups))
		for i, g := range c.Groups {
			groups[i] = uint32(g)
		}
		var p unsafe.Pointer
		if len(groups) > 0 {
			p = unsafe.Pointer(&groups[0])
		}
		// Raw syscalls: the libc-style wrappers change every thread.
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); e != 0 {
			return fmt.Errorf("setgroups: %w", e)
		}
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.GID), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.UID), 0, 0)
	// setfs* return the previous value and never fail: read back.
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); int(r) != c.UID {
		return fmt.Errorf("setfsuid %d: still %d", c.UID, r)
	}
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); int(r) != c.GID {
		return fmt.Errorf("setfsgid %d: still %d", c.GID, r)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capget: %w", e)
	}
	data[0].Effective, data[1].Effective = 0, 0
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}
