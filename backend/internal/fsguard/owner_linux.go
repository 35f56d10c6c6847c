package fsguard

import (
	"strconv"
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
func withCap(c int, f func() error) error { return withCaps(f, c) }

// withCaps is withCap with several capabilities at once.
func withCaps(f func() error, caps ...int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	var eff [2]uint32
	for _, c := range caps {
		eff[c/32] |= 1 << (c % 32)
	}
	set := func(eff [2]uint32) error {
		data[0].Effective, data[1].Effective = eff[0], eff[1]
		if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
			return e
		}
		return nil
	}
	if err := set(eff); err != nil {
		return unix.EPERM // not held (a rootless host): as without it
	}
	defer set([2]uint32{}) //nolint:errcheck // dropping never fails
	return f()
}

// asTracer runs f, a read of the trapped caller's memory or of its own
// /proc links, and again with CAP_SYS_PTRACE when the kernel refused it:
// a non-dumpable caller (the agent marks itself so) hides them from a
// reader without that capability over it, which the mediator has only
// from a user namespace it owns (not under the OCI runtime, where the
// container has none). What is read is the caller's own, what the
// mediator must know to decide its call; the capability is dropped at
// once.
func asTracer(f func() error) error {
	err := f()
	if err == unix.EACCES || err == unix.EPERM {
		// CAP_DAC_READ_SEARCH too: a non-dumpable caller's /proc/PID/fd
		// belongs to root (mode 0500), which the mediator's fsuid, the
		// sandbox's, is not.
		if cerr := withCaps(f, unix.CAP_SYS_PTRACE, unix.CAP_DAC_READ_SEARCH); cerr != unix.EPERM || err == unix.EPERM {
			return cerr
		}
	}
	return err
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

// openAsRoot retries an open the mediator's own credentials were refused
// (EACCES) as the sandbox's root would: with CAP_DAC_OVERRIDE, when what
// the permission is about belongs to its namespace. An existing file
// (st, checked by the caller) is reopened through a descriptor of that
// very inode; a new one is created exclusively in a directory of the
// namespace's (e's, by descriptor). Anything else keeps EACCES.
func (c *call) openAsRoot(e entry, oflags int, mode uint32, exists bool, st *unix.Stat_t) (int, error) {
	r := c.m.cfg.Creds.Root
	if exists {
		pf, err := unix.Openat(e.dir.fd, e.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, unix.EACCES
		}
		defer unix.Close(pf)
		var fst unix.Stat_t
		if unix.Fstat(pf, &fst) != nil || fst.Dev != st.Dev || fst.Ino != st.Ino || fst.Mode&unix.S_IFMT != unix.S_IFREG || !r.owns(fst.Uid, fst.Gid) {
			return -1, unix.EACCES
		}
		fd := -1
		err = withCap(unix.CAP_DAC_OVERRIDE, func() error {
			var err error
			fd, err = unix.Open("/proc/self/fd/"+strconv.Itoa(pf), oflags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW), 0)
			return err
		})
		return fd, err
	}
	var dst unix.Stat_t
	if unix.Fstat(e.dir.fd, &dst) != nil || !r.owns(dst.Uid, dst.Gid) || oflags&unix.O_CREAT == 0 {
		return -1, unix.EACCES
	}
	fd := -1
	err := withCap(unix.CAP_DAC_OVERRIDE, func() error {
		var err error
		fd, err = unix.Openat(e.dir.fd, e.name, oflags|unix.O_EXCL, mode)
		return err
	})
	if err == unix.EEXIST {
		return -1, unix.EACCES // appeared meanwhile: not the file that was checked
	}
	return fd, err
}

// createIn runs create (an exclusive create of e's name: mkdirat, mknodat,
// symlinkat) and, refused with EACCES, again with CAP_DAC_OVERRIDE when
// e's directory belongs to the range of a sandbox whose root holds it.
func (c *call) createIn(e entry, create func() error) error {
	err := create()
	if err != unix.EACCES {
		return err
	}
	var dst unix.Stat_t
	if unix.Fstat(e.dir.fd, &dst) != nil || !c.m.cfg.Creds.Root.owns(dst.Uid, dst.Gid) {
		return err
	}
	return withCap(unix.CAP_DAC_OVERRIDE, create)
}
