package native

import (
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Features is what this host offers the native backend, for `airlock
// doctor` and Probe.
type Features struct {
	Rootless             bool   `json:"rootless"`
	UserNamespaces       bool   `json:"user_namespaces"`
	UserNamespacesReason string `json:"user_namespaces_reason,omitempty"`
	LandlockABI          int    `json:"landlock_abi"`
	Seccomp              bool   `json:"seccomp"`
	SeccompUserNotif     bool   `json:"seccomp_user_notif"`
	// SeccompAddFD: the supervisor can hand a descriptor over as a call's
	// result (SECCOMP_ADDFD_FLAG_SEND, Linux 5.14): what write mediation
	// needs.
	SeccompAddFD      bool     `json:"seccomp_addfd"`
	SeccompArch       bool     `json:"seccomp_arch_supported"`
	CgroupVersion     string   `json:"cgroup_version"` // v1, v2, hybrid, none
	CgroupV2Mount     string   `json:"cgroup_v2_mount,omitempty"`
	CgroupControllers []string `json:"cgroup_controllers"` // usable by this user
	CgroupReason      string   `json:"cgroup_reason,omitempty"`
}

var (
	featuresOnce sync.Once
	features     Features
)

// HostFeatures detects (once per process) what the host supports.
func HostFeatures() Features {
	featuresOnce.Do(func() { features = detectFeatures() })
	return features
}

func detectFeatures() Features {
	f := Features{Rootless: os.Geteuid() != 0}
	f.UserNamespaces, f.UserNamespacesReason = userNamespaces(f.Rootless)
	f.LandlockABI = landlockABI()
	f.Seccomp, f.SeccompUserNotif = seccompSupport()
	f.SeccompAddFD = f.SeccompUserNotif && kernelAtLeast(5, 14)
	_, f.SeccompArch = auditArch[runtime.GOARCH]
	h := hostCgroups()
	switch {
	case h.v2Mount != "" && len(h.v1Mount) > 0:
		f.CgroupVersion = "hybrid"
	case h.v2Mount != "":
		f.CgroupVersion = "v2"
	case len(h.v1Mount) > 0:
		f.CgroupVersion = "v1"
	default:
		f.CgroupVersion = "none"
	}
	f.CgroupV2Mount = h.v2Mount
	usable := map[string]bool{}
	if p := h.v2Parent(""); p != "" {
		dir := p
		if _, err := os.Stat(dir); err != nil {
			dir = parentDir(p)
		}
		if unix.Access(dir, unix.W_OK) == nil {
			for c := range v2Controllers(dir) {
				if c == "memory" || c == "pids" || c == "cpu" {
					usable[c] = true
				}
			}
			usable["cgroup2"] = true
		}
	}
	for c, mp := range h.v1Mount {
		dir := h.v1Parent(c, "")
		if _, err := os.Stat(dir); err != nil {
			dir = mp
		}
		if unix.Access(dir, unix.W_OK) == nil {
			usable[c] = true
		}
	}
	for c := range usable {
		f.CgroupControllers = append(f.CgroupControllers, c)
	}
	sort.Strings(f.CgroupControllers)
	if !usable["memory"] || !usable["pids"] || !usable["cpu"] {
		f.CgroupReason = whyNoCgroup(h)
	}
	return f
}

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// userNamespaces reports whether we may create a user namespace.
func userNamespaces(rootless bool) (bool, string) {
	if n, err := readSysctl("/proc/sys/user/max_user_namespaces"); err == nil && n == 0 {
		return false, "user.max_user_namespaces is 0"
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return false, "kernel built without user namespaces"
	}
	if rootless {
		if n, err := readSysctl("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && n == 0 {
			return false, "kernel.unprivileged_userns_clone is 0 (run as root or enable it)"
		}
		if n, err := readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && n == 1 {
			return false, "kernel.apparmor_restrict_unprivileged_userns is 1 (AppArmor blocks unprivileged user namespaces; run as root or add an AppArmor profile)"
		}
	}
	return true, ""
}

// kernelAtLeast compares the running kernel's release with major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	rel := unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func readSysctl(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// seccompSupport checks filter mode and the user-notification action.
func seccompSupport() (filter, notif bool) {
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return false, false
	}
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	return true, e == 0
}
