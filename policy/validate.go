package policy

import (
	"fmt"
	"math"
	"strings"
)

// Known values of the enumerated fields.
var (
	// Backends are the backends this build has (and auto); a test in
	// package backend keeps the list equal to backend.Names.
	Backends   = []string{"auto", "native", "gvisor", "docker", "wasm", "microvm", "kubernetes"}
	Isolations = []string{"weak", "kernel", "medium", "hardware"}
	modes      = []string{NetworkNone, NetworkAllowlist, NetworkOpen}
)

// Upper bounds that catch typos (a limit beyond them is a mistake, not a wish).
const (
	maxCPUs      = 1024
	maxPids      = 1 << 22 // the kernel's PID_MAX_LIMIT
	maxOpenFiles = 1 << 30 // the kernel's NR_OPEN ceiling
	minMemory    = 1 << 20
	maxID        = 1<<32 - 2 // (uid_t)-1 means "no change" to the kernel
)

// checker collects problems with their field paths and locates them in the
// policy's source file.
type checker struct {
	p        *Policy
	resolved bool
	errs     []*Error
}

func (c *checker) add(field, format string, args ...any) {
	file, line, field := c.p.src.locate(field)
	c.errs = append(c.errs, &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Validate checks p as it stands (paths may still use ~ and $HOME; limits
// may be Unlimited). Resolve validates again after expanding.
func (p *Policy) Validate() error { return joinErrors(p.check(false)) }

// ValidateResolved checks that p is a resolved policy (what backends
// receive): valid, every path absolute and clean, defaults filled in.
// Backends call it to refuse a policy that did not go through Resolve.
func (p *Policy) ValidateResolved() error {
	errs := p.check(true)
	c := &checker{p: p, resolved: true}
	if p.Filesystem.Workspace == "" {
		c.add("filesystem.workspace", "empty in a resolved policy (Resolve sets it)")
	}
	if p.Process.Workdir == "" {
		c.add("process.workdir", "empty in a resolved policy (Resolve sets it)")
	}
	if p.Network.Mode == "" {
		c.add("network.mode", "empty in a resolved policy (Resolve sets it)")
	}
	if p.Filesystem.ProtectConfig == nil {
		c.add("filesystem.protect_config", "unset in a resolved policy (Resolve sets it)")
	}
	for _, l := range [][]string{p.Filesystem.ReadOnly, p.Filesystem.ReadWrite, p.Filesystem.Deny, p.Filesystem.Tmpfs, {p.Filesystem.Rootfs, p.Filesystem.WorkspacePath(), p.Filesystem.WorkspaceMount, p.Process.Workdir}} {
		for _, s := range l {
			if s != "" && cleanPath(s) != s {
				c.add("filesystem", "%q is not clean in a resolved policy", s)
			}
		}
	}
	return joinErrors(append(errs, c.errs...))
}

// check validates p. Before resolution paths may start with ~ or $HOME and
// limits may be Unlimited; after it neither.
func (p *Policy) check(resolved bool) []*Error {
	c := &checker{p: p, resolved: resolved}
	if resolved && p.Version != Version {
		c.add("version", "unsupported version %d (this build understands version: %d)", p.Version, Version)
	}
	if p.Profile != "" {
		if _, ok := profiles[p.Profile]; !ok {
			c.add("profile", "unknown profile %q (known: %s)", p.Profile, strings.Join(Profiles(), ", "))
		}
	}
	c.oneOf("backend", p.Backend, Backends)
	c.oneOf("isolation", p.Isolation, Isolations)
	c.filesystem()
	c.network()
	c.process()
	c.limits()
	c.secrets()
	if a := p.Audit.File; a != "" && a != "-" && strings.IndexByte(a, 0) >= 0 {
		c.add("audit.file", "contains a NUL byte")
	}
	return c.errs
}

func (c *checker) filesystem() {
	p := c.p
	fs := &p.Filesystem
	if fs.Rootfs != "" {
		c.path("filesystem.rootfs", fs.Rootfs)
	}
	switch {
	case fs.Image == "":
	case fs.Rootfs != "":
		c.add("filesystem.image", "image and rootfs are exclusive (a rootfs is a directory; an image comes from the image store)")
	case len(fs.Image) > 512 || strings.ContainsAny(fs.Image, " \t\n\x00"):
		c.add("filesystem.image", "%q is not an image reference (NAME[:TAG][@DIGEST])", fs.Image)
	}
	if m := fs.WorkspaceMount; m != "" {
		if why := MountPointProblem(m); why != "" {
			c.add("filesystem.workspace_mount", "%s", why)
		}
	}
	switch ws := fs.Workspace; {
	case ws == "" || ws == "none":
	case strings.IndexByte(ws, 0) >= 0:
		c.add("filesystem.workspace", "contains a NUL byte")
	case c.resolved && !isAbs(ws):
		c.add("filesystem.workspace", "%q must be an absolute path", ws)
	case cleanPath(ws) == "/":
		c.add("filesystem.workspace", "refusing to use / as the workspace (it would make the whole host writable)")
	}
	for i, s := range fs.ReadOnly {
		c.path(fmt.Sprintf("filesystem.read_only[%d]", i), s)
	}
	for i, s := range fs.ReadWrite {
		f := fmt.Sprintf("filesystem.read_write[%d]", i)
		if c.path(f, s) && cleanPath(s) == "/" {
			c.add(f, "refusing to make / writable")
		}
	}
	for i, s := range fs.Deny {
		c.path(fmt.Sprintf("filesystem.deny[%d]", i), s)
	}
	for i, s := range fs.Tmpfs {
		f := fmt.Sprintf("filesystem.tmpfs[%d]", i)
		if c.path(f, s) && cleanPath(s) == "/" {
			c.add(f, "refusing to put a tmpfs over /")
		}
	}

	for i, s := range fs.WritableConfig {
		f := fmt.Sprintf("filesystem.writable_config[%d]", i)
		switch {
		case s == "":
			c.add(f, "empty path")
		case strings.IndexByte(s, 0) >= 0:
			c.add(f, "contains a NUL byte")
		case c.resolved && !isAbs(s):
			c.add(f, "%q must be an absolute path in a resolved policy", s)
		}
	}
	for i, s := range p.Caches {
		c.oneOf(fmt.Sprintf("caches[%d]", i), s, CacheNames())
	}
}

func (c *checker) network() {
	p := c.p
	c.oneOf("network.mode", p.Network.Mode, modes)
	for i, s := range p.Network.Allow {
		if m := checkNetworkEntry(s); m != "" {
			c.add(fmt.Sprintf("network.allow[%d]", i), "%s", m)
		}
	}
	for i, s := range p.Network.Deny {
		if m := checkNetworkEntry(s); m != "" {
			c.add(fmt.Sprintf("network.deny[%d]", i), "%s", m)
		}
	}
	if _, err := CompileRequests(p.Network); err != nil {
		c.add("network.requests", "%s", message(err))
	}
}

func (c *checker) process() {
	pr := &c.p.Process
	for i, s := range pr.EnvAllow {
		f := fmt.Sprintf("process.env_allow[%d]", i)
		name := strings.TrimSuffix(s, "*")
		switch {
		case s == "*" || name == "":
			c.add(f, "%q would pass the whole host environment; list names or PREFIX_* globs", s)
		case !ValidEnvName(name) || strings.Contains(name, "*"):
			c.add(f, "%q is not a variable name or PREFIX_* glob", s)
		}
	}
	for _, k := range sortedKeys(pr.Env) {
		f := "process.env." + k
		if !ValidEnvName(k) {
			c.add(f, "%q is not a valid variable name", k)
		}
		if strings.IndexByte(pr.Env[k], 0) >= 0 {
			c.add(f, "value contains a NUL byte")
		}
	}
	if pr.Workdir != "" {
		c.path("process.workdir", pr.Workdir)
	}
	c.id("process.uid", pr.UID)
	c.id("process.gid", pr.GID)
	c.oneOf("process.capabilities", pr.Capabilities, []string{CapabilitiesDefault, CapabilitiesNone})
}

func (c *checker) limits() {
	l := &c.p.Limits
	c.limit("limits.memory", float64(l.Memory), 0)
	if l.Memory > 0 && l.Memory < minMemory {
		c.add("limits.memory", "%s is too small to run anything (at least 1Mi)", l.Memory)
	}
	c.limit("limits.cpus", l.CPUs, maxCPUs)
	if l.CPUs > 0 && l.CPUs < 0.01 {
		c.add("limits.cpus", "%v is below the smallest CPU share (0.01)", l.CPUs)
	}
	c.limit("limits.pids", float64(l.Pids), maxPids)
	c.limit("limits.open_files", float64(l.OpenFiles), maxOpenFiles)
	c.limit("limits.timeout", float64(l.Timeout), 0)
	c.limit("limits.output_bytes", float64(l.OutputBytes), 0)
	c.limit("limits.disk", float64(l.DiskBytes), 0)
}

func (c *checker) oneOf(field, v string, known []string) {
	if v == "" {
		return
	}
	for _, k := range known {
		if v == k {
			return
		}
	}
	c.add(field, "unknown value %q (known: %s)", v, strings.Join(known, ", "))
}

// path checks a path that must be absolute (after resolution) or absolute,
// ~ or $HOME-relative (before). It reports whether the path was fine.
func (c *checker) path(field, s string) bool {
	switch {
	case s == "":
		c.add(field, "empty path")
	case strings.IndexByte(s, 0) >= 0:
		c.add(field, "contains a NUL byte")
	case isAbs(s):
		return true
	case !c.resolved && homeRelative(s):
		return true
	case !c.resolved && strings.HasPrefix(s, "~"):
		c.add(field, "%q: only ~ and ~/... are expanded, not ~user", s)
	case strings.HasPrefix(s, "$"):
		c.add(field, "%q: only $HOME is expanded", s)
	default:
		c.add(field, "%q must be an absolute path", s)
	}
	return false
}

func (c *checker) id(field string, v *int) {
	if v != nil && (*v < 0 || *v > maxID) {
		c.add(field, "%d out of range (0-%d)", *v, maxID)
	}
}

func (c *checker) limit(field string, v, max float64) {
	switch {
	case v == Unlimited && !c.resolved:
	case v < 0:
		c.add(field, "must not be negative, got %v", v)
	case max > 0 && v > max:
		c.add(field, "%v is more than the maximum %v", v, max)
	case math.IsNaN(v) || math.IsInf(v, 0):
		c.add(field, "must be a finite number")
	}
}

func (c *checker) secrets() {
	seen := map[string]bool{}
	envs := map[string]bool{}
	for i, s := range c.p.Secrets {
		f := fmt.Sprintf("secrets[%d]", i)
		dup := s.Name != "" && seen[s.Name]
		switch {
		case s.Name == "":
			c.add(f+".name", "required")
		case dup:
			c.add(f+".name", "secret %q defined twice", s.Name)
		}
		seen[s.Name] = true
		env := s.Env
		envField := f + ".env"
		if env == "" {
			env, envField = s.Name, f+".name"
		}
		if s.Name != "" || s.Env != "" {
			if !ValidEnvName(env) {
				c.add(envField, "%q is not a valid variable name (the secret's placeholder variable; set env: to choose one)", env)
			} else if envs[env] && !dup {
				c.add(envField, "variable %s is used by two secrets", env)
			}
			envs[env] = true
		}
		switch {
		case s.FromEnv == "" && s.FromFile == "":
			c.add(f, "needs one of from_env or from_file")
		case s.FromEnv != "" && s.FromFile != "":
			c.add(f, "set only one of from_env and from_file")
		case s.FromEnv != "" && !ValidEnvName(s.FromEnv):
			c.add(f+".from_env", "%q is not a valid variable name", s.FromEnv)
		case s.FromFile != "":
			c.path(f+".from_file", s.FromFile)
		}
		if len(s.Hosts) == 0 {
			c.add(f+".hosts", "required: the hosts this secret may be sent to")
		}
		for j, h := range s.Hosts {
			hf := fmt.Sprintf("%s.hosts[%d]", f, j)
			e, err := ParseNetworkEntry(h)
			switch {
			case err != nil:
				c.add(hf, "%s", message(err))
			case e.Host == "":
				c.add(hf, "%q: secrets go to host names, not addresses", h)
			}
		}
	}
}

// ValidEnvName reports whether s is an environment variable name a shell
// can export: a letter or _ first, then letters, digits and _.
func ValidEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// MountPointProblem says why m cannot be where a host directory (the
// workspace, a volume) is mounted inside a sandbox, or "": it must be an
// absolute path, not /, and not under what the sandbox gets fresh.
func MountPointProblem(m string) string {
	switch {
	case !isAbs(m) || strings.IndexByte(m, 0) >= 0:
		return fmt.Sprintf("%q must be an absolute path inside the sandbox", m)
	case cleanPath(m) == "/":
		return "nothing can be mounted over /"
	}
	for _, k := range []string{"/proc", "/dev", "/sys", "/tmp"} {
		if cleanPath(m) == k || strings.HasPrefix(cleanPath(m), k+"/") {
			return fmt.Sprintf("%q is under %s, which the sandbox gets fresh", m, k)
		}
	}
	return ""
}
