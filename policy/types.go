// Package policy defines Airlock's policy (version 1): what a sandbox may
// read and write, which hosts it may reach, what environment it sees and how
// much it may use. It loads YAML strictly (unknown fields are errors naming
// file, line and field), merges built-in profiles and flags, and resolves
// paths. It must never apply anything to the host: backends enforce it.
package policy

import (
	"fmt"
	"time"
)

// Version is the only policy version this build understands.
const Version = 1

// Policy is a sandbox policy. After Resolve, every path is absolute and
// cleaned and every default is filled in; backends only see resolved
// policies.
type Policy struct {
	Version int `yaml:"version" json:"version"`
	// Profile names a built-in profile this policy starts from ("default" when empty).
	Profile string `yaml:"profile,omitempty" json:"profile,omitempty"`
	// Backend: native, gvisor, wasm or auto (Backends).
	Backend string `yaml:"backend,omitempty" json:"backend,omitempty"`
	// Isolation is the minimum isolation level for --backend auto:
	// kernel, medium, hardware (weak allows docker).
	Isolation string `yaml:"isolation,omitempty" json:"isolation,omitempty"`
	// AllowDegraded explicitly allows starting when a requested protection
	// is unavailable on this host. Logged as a degraded event.
	AllowDegraded bool `yaml:"allow_degraded,omitempty" json:"allow_degraded,omitempty"`

	Filesystem Filesystem `yaml:"filesystem,omitempty" json:"filesystem"`
	Network    Network    `yaml:"network,omitempty" json:"network"`
	Process    Process    `yaml:"process,omitempty" json:"process"`
	Limits     Limits     `yaml:"limits,omitempty" json:"limits"`
	Secrets    []Secret   `yaml:"secrets,omitempty" json:"secrets,omitempty"`
	// Caches name tool caches (go, npm, pip, cargo) kept between runs in
	// Airlock's own per-user store and mounted where the tool looks.
	Caches []string `yaml:"caches,omitempty" json:"caches,omitempty"`
	Audit  Audit    `yaml:"audit,omitempty" json:"audit"`

	// src remembers the file and the line of each field the file set, so
	// that errors found after merging and resolving still name them.
	src *source
}

// Filesystem says what the sandbox sees. Paths are host paths, mounted at the
// same place inside, unless Rootfs is set (then ReadOnly/ReadWrite are host
// paths bound at the same path inside the rootfs).
type Filesystem struct {
	// Rootfs is a directory used as the sandbox's root instead of the host's
	// system directories. Empty: the host's system directories, read-only.
	Rootfs string `yaml:"rootfs,omitempty" json:"rootfs,omitempty"`
	// Image names an OCI image of the image store (`airlock image pull`)
	// used as the root: its layers read-only and shared, a writable layer
	// private to the sandbox on top. Exclusive with Rootfs. Host system
	// directories are not mounted; the image's config gives the
	// environment, working directory, user and command defaults.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// WorkspaceMount is where the workspace appears inside: default its
	// host path, or /workspace with an image (a stable path whatever the
	// host's layout).
	WorkspaceMount string `yaml:"workspace_mount,omitempty" json:"workspace_mount,omitempty"`
	// Workspace is mounted read-write at the same path; "" means the current
	// directory; "none" means no workspace.
	Workspace string `yaml:"workspace,omitempty" json:"workspace,omitempty"`
	// ReadOnly and ReadWrite are extra host paths made visible.
	ReadOnly  []string `yaml:"read_only,omitempty" json:"read_only,omitempty"`
	ReadWrite []string `yaml:"read_write,omitempty" json:"read_write,omitempty"`
	// Deny paths are inaccessible even inside allowed trees.
	Deny []string `yaml:"deny,omitempty" json:"deny,omitempty"`
	// Tmpfs paths get a fresh private tmpfs (/tmp always does).
	Tmpfs []string `yaml:"tmpfs,omitempty" json:"tmpfs,omitempty"`
	// ProtectConfig denies writes, at any depth of every writable host
	// path, to files that make programs outside the sandbox run code
	// (git hooks and config, .envrc, editor and agent settings, shell rc
	// files of a home): see ConfigGuard. Default true.
	ProtectConfig *bool `yaml:"protect_config,omitempty" json:"protect_config,omitempty"`
	// WritableConfig are paths (relative to the workspace, or absolute)
	// below which protected configuration may be written anyway: a
	// repository the agent must create, say. Pinned files stay pinned.
	WritableConfig []string `yaml:"writable_config,omitempty" json:"writable_config,omitempty"`
}

// Network modes.
const (
	NetworkNone      = "none"
	NetworkAllowlist = "allowlist"
	NetworkOpen      = "open"
)

// Network is the egress policy. Inside the sandbox there is only loopback;
// everything else goes through the host-side egress proxy.
type Network struct {
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Allow and Deny entries: host names with "*." wildcards and optional
	// ":port", or CIDRs. Deny wins; an empty Allow means nothing.
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
	Deny  []string `yaml:"deny,omitempty" json:"deny,omitempty"`
	// Requests are HTTP request rules per host (first match wins): once a
	// host has one, only requests matching an allow rule pass, and its TLS
	// is intercepted so the proxy can see them. See RequestRule.
	Requests []RequestRule `yaml:"requests,omitempty" json:"requests,omitempty"`
	// Git expands to request rules for git's smart HTTP endpoints.
	Git *GitRules `yaml:"git,omitempty" json:"git,omitempty"`
	// Budgets bound bytes sent and requests per minute per host.
	Budgets []Budget `yaml:"budgets,omitempty" json:"budgets,omitempty"`
	// Bounds are request rules a request must also pass (an operator's
	// ceiling puts its rules here): for a host they name, a request must
	// match an allow bound first. They only narrow.
	Bounds []RequestRule `yaml:"bounds,omitempty" json:"bounds,omitempty"`
}

// Secret is a credential that never enters the sandbox: inside, Env holds a
// placeholder that the egress proxy replaces in request headers sent to Hosts.
type Secret struct {
	Name     string   `yaml:"name" json:"name"`
	Env      string   `yaml:"env,omitempty" json:"env,omitempty"`             // variable name inside (default: Name)
	FromEnv  string   `yaml:"from_env,omitempty" json:"from_env,omitempty"`   // host variable holding the value
	FromFile string   `yaml:"from_file,omitempty" json:"from_file,omitempty"` // host file holding the value
	Hosts    []string `yaml:"hosts" json:"hosts"`
}

// Process is what the sandbox's processes start with.
type Process struct {
	// EnvAllow names host variables passed through (exact names or
	// "PREFIX_*" globs). Names matching the secret patterns (*_KEY,
	// *_TOKEN, *SECRET*, ...) are never passed, even when allowed.
	EnvAllow []string `yaml:"env_allow,omitempty" json:"env_allow,omitempty"`
	// Env sets variables (wins over passed-through ones).
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Workdir inside the sandbox; default the workspace (or /).
	Workdir string `yaml:"workdir,omitempty" json:"workdir,omitempty"`
	// UID and GID inside the sandbox; default the caller's.
	UID *int `yaml:"uid,omitempty" json:"uid,omitempty"`
	GID *int `yaml:"gid,omitempty" json:"gid,omitempty"`
	// Capabilities is what root inside holds where a backend can give it
	// capabilities over the sandbox's own namespace only (a native image
	// sandbox with its own host id range): "default" (or empty) a
	// Docker-like set, "none" nothing (as every other sandbox).
	Capabilities string `yaml:"capabilities,omitempty" json:"capabilities,omitempty"`
}

// Values of Process.Capabilities.
const (
	CapabilitiesDefault = "default"
	CapabilitiesNone    = "none"
)

// Limits bound what a sandbox may use. Zero means "no limit" only where the
// profile sets none; the default profile sets all of them.
type Limits struct {
	Memory      ByteSize `yaml:"memory,omitempty" json:"memory,omitempty"`
	CPUs        float64  `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	Pids        int      `yaml:"pids,omitempty" json:"pids,omitempty"`
	OpenFiles   int      `yaml:"open_files,omitempty" json:"open_files,omitempty"`
	Timeout     Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	OutputBytes ByteSize `yaml:"output_bytes,omitempty" json:"output_bytes,omitempty"`
	// DiskBytes bounds the size of each tmpfs the sandbox gets.
	DiskBytes ByteSize `yaml:"disk,omitempty" json:"disk,omitempty"`
}

// Audit says where events go.
type Audit struct {
	// File receives JSON lines; "-" is stderr; empty: nowhere (run) or the
	// server's store (serve).
	File string `yaml:"file,omitempty" json:"file,omitempty"`
}

// ByteSize is a size in bytes; YAML accepts integers or strings with a
// suffix: 512Mi, 2G, 100k.
type ByteSize int64

// Duration is a time.Duration; YAML accepts Go duration strings ("30s", "5m").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Credentials returns the uid and gid the sandbox's processes run as: the
// policy's, or the caller's (uid, gid) where it sets none. It fails for ids
// outside the range a user namespace can map.
func (p Process) Credentials(uid, gid int) (int, int, error) {
	if p.UID != nil {
		uid = *p.UID
	}
	if p.GID != nil {
		gid = *p.GID
	}
	if uid < 0 || gid < 0 || uid > 1<<31-2 || gid > 1<<31-2 {
		return 0, 0, fmt.Errorf("uid/gid %d/%d out of range: %w", uid, gid, ErrInvalid)
	}
	return uid, gid, nil
}
