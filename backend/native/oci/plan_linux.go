package oci

import (
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/backend/native"
)

// initPlan is everything the container's init (`airlock __oci-init`)
// applies, decided on the host side from config.json, the Airlock policy
// and the operator's ceiling. It travels as JSON in a memfd (fd 3); the
// init trusts it (it comes from the runtime before anything of the
// container runs).
type initPlan struct {
	ID      string `json:"id"`
	Rootfs  string `json:"rootfs"` // absolute host path
	NoPivot bool   `json:"no_pivot,omitempty"`
	// Propagation is the root mount's propagation (MS_SLAVE default).
	Propagation uintptr     `json:"propagation"`
	RootRO      bool        `json:"root_ro,omitempty"`
	Mounts      []mountStep `json:"mounts"`
	Devices     []string    `json:"devices"` // host /dev nodes bound into /dev
	Masked      []string    `json:"masked"`
	ReadOnly    []string    `json:"read_only"`
	Hostname    string      `json:"hostname,omitempty"`
	Domainname  string      `json:"domainname,omitempty"`
	Sysctl      [][2]string `json:"sysctl,omitempty"`
	// NewNet: the container has a network namespace of its own (lo up).
	// PrivateNet: the policy says network none: the init moves into a
	// fresh, empty network namespace of its own after setup.
	NewNet     bool        `json:"new_net,omitempty"`
	PrivateNet bool        `json:"private_net,omitempty"`
	Confine    confinement `json:"confine"`
	Proc       procPlan    `json:"proc"`
}

// mountStep is one config.json mount, resolved.
type mountStep struct {
	Dst        string      `json:"dst"` // inside the rootfs
	Src        string      `json:"src"` // host path for binds
	Type       string      `json:"type"`
	Flags      uintptr     `json:"flags"`
	Data       string      `json:"data,omitempty"`
	Prop       uintptr     `json:"prop,omitempty"`
	Bind       bool        `json:"bind,omitempty"`
	SrcIsDir   bool        `json:"src_dir,omitempty"`
	Cgroup     bool        `json:"cgroup,omitempty"`      // the cgroup filesystem: the container's own cgroups, read-only
	CgroupDirs [][2]string `json:"cgroup_dirs,omitempty"` // name -> host directory
}

// confinement is what every process of the container gets, the init and
// each exec alike: the same Landlock domain, seccomp filters and
// capability ceiling. It is kept in the container's state for exec.
type confinement struct {
	// Special are container paths whose Landlock rule is not the
	// read-write default: read-only by policy, or mediated.
	ReadOnlyPaths []string          `json:"ro_paths,omitempty"`
	MediatedPaths []string          `json:"mediated_paths,omitempty"`
	UseLandlock   bool              `json:"use_landlock"`
	Floor         []unix.SockFilter `json:"floor,omitempty"`
	Filter        []unix.SockFilter `json:"filter,omitempty"`
	Listen        bool              `json:"listen,omitempty"`
	Ceiling       []int             `json:"ceiling"`
}

// procPlan is the container's (or an exec's) process.
type procPlan struct {
	Args     []string `json:"args"`
	Env      []string `json:"env"`
	Cwd      string   `json:"cwd"`
	UID      uint32   `json:"uid"`
	GID      uint32   `json:"gid"`
	Groups   []uint32 `json:"groups,omitempty"`
	Umask    *uint32  `json:"umask,omitempty"`
	Terminal bool     `json:"terminal,omitempty"`
	Caps     capSets  `json:"caps"`
	Rlimits  []rlimit `json:"rlimits,omitempty"`
	OOMScore *int     `json:"oom_score_adj,omitempty"`
}

type capSets struct {
	Bounding, Effective, Permitted, Inheritable, Ambient []int
}

type rlimit struct {
	Resource int    `json:"r"`
	Cur      uint64 `json:"c"`
	Max      uint64 `json:"m"`
}

// landlockRules turns the confinement into rules for the tree at root
// (the container's "/", seen by the init after pivot_root): every path
// read-write except device creation, the read-only paths read and
// execute, the mediated ones what the write mediator leaves to the
// kernel. Landlock grants the union of a path's ancestors' rules, so the
// read-write grant is made on the siblings of every special path, not on
// its ancestors.
func (c *confinement) landlockRules(list func(dir string) []dirEntry) []native.LandlockRule {
	rw := native.LandlockReadWrite &^ native.LandlockMakeDevice
	special := map[string]uint64{}
	for _, p := range c.ReadOnlyPaths {
		special[p] = native.LandlockReadExec
	}
	for _, p := range c.MediatedPaths {
		special[p] = native.LandlockMediated
	}
	var rules []native.LandlockRule
	var grant func(p string, dir bool)
	grant = func(p string, dir bool) {
		add := func(a uint64) {
			if !dir {
				a &= native.LandlockFileRights
			}
			rules = append(rules, native.LandlockRule{Access: a, Path: p})
		}
		if a, ok := special[p]; ok {
			add(a)
			return
		}
		deeper := false
		for s := range special {
			if dir && under(s, p) && s != p {
				deeper = true
				break
			}
		}
		if !deeper {
			add(rw)
			return
		}
		add(native.LandlockReadExec)
		for _, e := range list(p) {
			grant(e.path, e.dir)
		}
	}
	grant("/", true)
	return rules
}

// dirEntry is a path Landlock rules may go on.
type dirEntry struct {
	path string
	dir  bool
}

// under reports whether p is root or below it (both clean and absolute).
func under(p, root string) bool {
	if root == "/" {
		return len(p) > 0 && p[0] == '/'
	}
	return p == root || len(p) > len(root) && p[:len(root)] == root && p[len(root)] == '/'
}
