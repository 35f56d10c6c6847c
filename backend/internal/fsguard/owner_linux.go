package fsguard

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Range is a sandbox's host id range when root inside holds capabilities
// over its own namespace (a native image sandbox with a leased range):
// over files whose owner and group both fall in it, the mediator acts
// as that root would, with CAP_FOWNER, and over no other file.
type Range struct {
	UID, GID, Count int
}

// owns reports whether r's root may act as the owner of a file of uid and
// gid (both mapped into its namespace, as the kernel's capability checks
// over an inode require).
func (r *Range) owns(uid, gid uint32) bool {
	return r != nil && r.Count > 0 &&
		int64(uid) >= int64(r.UID) && int64(uid) < int64(r.UID)+int64(r.Count) &&
		int64(gid) >= int64(r.GID) && int64(gid) < int64(r.GID)+int64(r.Count)
}

// withCap runs f on this (the mediator's) thread with capability c
// effective, then drops every effective capability again. The caller has
// checked what f touches: here the capability reaches every host file.
func withCap(c int, f func() error) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	set := func(eff uint32) error {
		data[c/32].Effective = eff
		if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
			return e
		}
		return nil
	}
	if err := set(1 << (c % 32)); err != nil {
		return unix.EPERM // not held (a rootless host): as without it
	}
	defer set(0) //nolint:errcheck // dropping never fails
	return f()
}

// chmodAsRoot retries a chmod the mediator's own credentials were refused
// (f, through a descriptor it holds on the file, whose owner st gives)
// as the sandbox's root would: with CAP_FOWNER, when the file is its
// namespace's.
func (c *call) chmodAsRoot(err error, st *unix.Stat_t, f func() error) error {
	if err != unix.EPERM || !c.m.cfg.Creds.Root.owns(st.Uid, st.Gid) {
		return err
	}
	return withCap(unix.CAP_FOWNER, f)
}
