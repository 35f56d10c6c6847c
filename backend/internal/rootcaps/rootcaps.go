// Package rootcaps is the one list of capabilities root inside an image
// sandbox with its own host id range keeps (docs/RATIONALE.md, "Why does
// root inside an image sandbox hold capabilities, and which?") and the
// one rule of when it keeps them, for every backend that grants them
// (native, gvisor). It must never grow a capability that reaches beyond
// the sandbox's own user namespace.
package rootcaps

import "github.com/airlock-dev/airlock/policy"

// Linux capability numbers (linux/capability.h), here so that the list
// builds on every OS.
const (
	capChown          = 0
	capDacOverride    = 1
	capFowner         = 3
	capFsetid         = 4
	capKill           = 5
	capSetgid         = 6
	capSetuid         = 7
	capSetpcap        = 8
	capNetBindService = 10
	capSetfcap        = 31
)

// Set is what root inside keeps: Docker's default set minus what is
// refused here anyway or means nothing in a user namespace:
// CAP_SYS_CHROOT (the seccomp filter refuses chroot), CAP_MKNOD (device
// nodes need it in the initial namespace; every mount is nodev),
// CAP_AUDIT_WRITE (checked against the initial namespace) and CAP_NET_RAW
// (raw and packet sockets: kernel attack surface, and only loopback to
// reach).
var Set = []int{capChown, capDacOverride, capFowner, capFsetid, capKill, capSetgid, capSetuid, capSetpcap, capNetBindService, capSetfcap}

var names = map[int]string{
	capChown: "CAP_CHOWN", capDacOverride: "CAP_DAC_OVERRIDE", capFowner: "CAP_FOWNER", capFsetid: "CAP_FSETID",
	capKill: "CAP_KILL", capSetgid: "CAP_SETGID", capSetuid: "CAP_SETUID", capSetpcap: "CAP_SETPCAP",
	capNetBindService: "CAP_NET_BIND_SERVICE", capSetfcap: "CAP_SETFCAP",
}

// Names returns Set as OCI runtime spec names (CAP_CHOWN, ...).
func Names() []string {
	out := make([]string, len(Set))
	for i, c := range Set {
		out[i] = names[c]
	}
	return out
}

// Keep reports whether a sandbox's root keeps Set: an image sandbox
// (nothing of the host's in its root but binds) with its own host id
// range (its root is an unprivileged host uid), whose processes run as
// root inside, unless the policy says none. Every other sandbox holds no
// capability at all.
func Keep(image, ranged bool, uid int, pol *policy.Policy) bool {
	return image && ranged && uid == 0 && pol.Process.Capabilities != policy.CapabilitiesNone
}
