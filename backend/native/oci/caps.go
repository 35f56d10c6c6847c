package oci

import (
	"fmt"
	"sort"
	"strings"
)

// capNames are the kernel's capabilities by number.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// DefaultCapabilities is the built-in ceiling: Docker's default set less
// what lets a container make device nodes (MKNOD), forge packets
// (NET_RAW), give files capabilities (SETFCAP), write the audit log or
// chroot (which the seccomp floor refuses anyway).
var DefaultCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
}

// neverGranted are capabilities no operator ceiling may hold: each one
// undoes the boundary (the kernel's own checks are all that would stand
// between the container and the host).
var neverGranted = map[int]string{
	capNum("CAP_SYS_ADMIN"):          "mounts, namespaces, most of the kernel's admin interfaces",
	capNum("CAP_SYS_MODULE"):         "loads kernel modules",
	capNum("CAP_SYS_RAWIO"):          "raw device and port I/O",
	capNum("CAP_SYS_PTRACE"):         "reads and writes other processes' memory",
	capNum("CAP_SYS_BOOT"):           "reboots the host",
	capNum("CAP_SYS_TIME"):           "sets the host's clock",
	capNum("CAP_NET_ADMIN"):          "reconfigures networking",
	capNum("CAP_DAC_READ_SEARCH"):    "open_by_handle_at reaches any host file",
	capNum("CAP_MAC_ADMIN"):          "changes the LSM policy",
	capNum("CAP_MAC_OVERRIDE"):       "overrides the LSM policy",
	capNum("CAP_BPF"):                "loads BPF programs",
	capNum("CAP_PERFMON"):            "perf events expose kernel memory",
	capNum("CAP_SYSLOG"):             "reads kernel addresses",
	capNum("CAP_LINUX_IMMUTABLE"):    "changes immutable files",
	capNum("CAP_MKNOD"):              "makes device nodes",
	capNum("CAP_SYS_RESOURCE"):       "overrides resource limits",
	capNum("CAP_CHECKPOINT_RESTORE"): "sets pids and reads process state of others",
	capNum("CAP_AUDIT_CONTROL"):      "changes the audit rules",
}

func capNum(name string) int {
	for i, n := range capNames {
		if n == name {
			return i
		}
	}
	panic("unknown capability " + name)
}

func capName(n int) string {
	if n >= 0 && n < len(capNames) {
		return capNames[n]
	}
	return fmt.Sprintf("CAP_%d", n)
}

// parseCap returns the number of a capability named as in config.json
// ("CAP_CHOWN", case-insensitive, prefix optional).
func parseCap(s string) (int, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(u, "CAP_") {
		u = "CAP_" + u
	}
	for i, n := range capNames {
		if n == u {
			return i, nil
		}
	}
	return -1, fmt.Errorf("unknown capability %q", s)
}

func capSet(names []string) (map[int]bool, error) {
	m := map[int]bool{}
	for _, s := range names {
		n, err := parseCap(s)
		if err != nil {
			return nil, err
		}
		m[n] = true
	}
	return m, nil
}

// clampCaps returns the capabilities of names that the ceiling holds, and
// the names it dropped. An unknown name is an error (config.json is wrong).
func clampCaps(names []string, ceiling map[int]bool) (kept []int, dropped []string, err error) {
	seen := map[int]bool{}
	for _, s := range names {
		n, err := parseCap(s)
		if err != nil {
			return nil, nil, err
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		if ceiling[n] {
			kept = append(kept, n)
		} else {
			dropped = append(dropped, capName(n))
		}
	}
	sort.Ints(kept)
	sort.Strings(dropped)
	return kept, dropped, nil
}
