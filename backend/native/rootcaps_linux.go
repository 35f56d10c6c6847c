package native

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/internal/rootcaps"
)

// rootCapabilities are what root inside an image sandbox with its own
// host id range keeps (rootcaps.Set): each a capability over the
// sandbox's own user namespace only: over files whose owners map into
// its range, over its own processes and network namespace.
var rootCapabilities = rootcaps.Set

// keepsRootCaps reports whether the sandbox's root keeps rootCapabilities
// (rootcaps.Keep: only with a host id range).
func keepsRootCaps(p *prepared, image bool) bool {
	return rootcaps.Keep(image, p.lease != nil, p.uid, p.pol)
}

// keepCapabilities leaves every thread of the init with exactly keep in
// its effective and permitted sets (nothing inheritable or ambient), the
// bounding set cut to keep (so that exec as uid 0 inside gives back keep
// and no more), the securebits locked so that a change to a non-zero uid
// clears them all (no keep-caps, no setuid fixup off, no ambient raise),
// and no_new_privs (file capabilities and set-id bits give nothing more).
// Unlike dropCapabilities, the bounding set is cut on every thread: with
// uid 0 exec rules in force, any thread's bounding set is what an exec
// from it would get.
func keepCapabilities(keep []int) error {
	const (
		secbitNorootLocked      = 1 << 1
		secbitNoSetuidFixupLock = 1 << 3
		secbitKeepCapsLocked    = 1 << 5
		secbitNoCapAmbientRaise = 1 << 6
		secbitNoCapAmbientLock  = 1 << 7
	)
	bits := secbitNorootLocked | secbitNoSetuidFixupLock | secbitKeepCapsLocked |
		secbitNoCapAmbientRaise | secbitNoCapAmbientLock
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, uintptr(bits), 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if slices.Contains(keep, c) {
			continue
		}
		if err := allThreads(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("bounding set %d: %w", c, err)
		}
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return fmt.Errorf("ambient: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for _, c := range keep {
		data[c/32].Effective |= 1 << (c % 32)
		data[c/32].Permitted |= 1 << (c % 32)
	}
	if err := allThreads(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// allThreads makes a system call on every thread of the process.
func allThreads(trap, a1, a2, a3 uintptr) error {
	if _, _, e := syscall.AllThreadsSyscall(trap, a1, a2, a3); e != 0 {
		if e == syscall.ENOTSUP {
			return fmt.Errorf("%w (all-threads syscalls need a CGO_ENABLED=0 build)", e)
		}
		return e
	}
	return nil
}
