package policy

import (
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
)

// ResolveEnv is what Resolve needs to know about the caller.
type ResolveEnv struct {
	Cwd     string   // absolute current directory: the default workspace
	Home    string   // the caller's home directory, for ~ and $HOME ("" : from HOME in Environ)
	Environ []string // the caller's environment ("K=V")
	UID     int      // default uid/gid inside the sandbox (-1: leave unset)
	GID     int
	// Exists reports whether a host path exists; built-in optional paths
	// (system dirs, agent config dirs) that do not are dropped. Nil: os.Stat.
	Exists func(path string) bool
	// GuardCwd refuses an implicit workspace (the current directory, when
	// the policy names none) that is the home directory, a parent of it or
	// a system directory: a CLI runs wherever the user happens to be, and
	// `airlock run` from ~ would otherwise make ~/.ssh writable. Naming
	// such a directory as the workspace still works. HostEnv sets it.
	GuardCwd bool
}

// HostEnv returns the ResolveEnv of this process, for a CLI (GuardCwd on).
func HostEnv() (ResolveEnv, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return ResolveEnv{}, fmt.Errorf("resolve policy: current directory: %w", err)
	}
	home, _ := os.UserHomeDir()
	return ResolveEnv{Cwd: cwd, Home: home, Environ: os.Environ(), UID: os.Getuid(), GID: os.Getgid(), GuardCwd: true}, nil
}

// Resolve returns a new policy with every path expanded (~, $HOME), made
// absolute and cleaned, every default filled in and everything validated.
// When env.Environ is set, process.env of the result holds the sandbox's
// base environment computed from it (Environ): the allowed, non-secret
// variables with their values, plus the policy's own settings.
// Errors wrap ErrInvalid and name the field (and the file and line when
// the field came from a file). p is not modified. Resolve does not layer
// profiles: Parse, LoadFile and WithProfile did that.
//
// What it fills in: version 1; workspace "" -> env.Cwd (relative -> under
// Cwd; "none" stays "none"); network mode allowlist when allow entries are
// given, else none; protect_config true; workdir the workspace (or /);
// uid/gid the caller's; secret env the secret's name; /tmp in tmpfs;
// Unlimited limits -> 0 (no limit). It also drops built-in optional paths
// missing on the host, the system dirs when a rootfs is set, duplicates,
// read_write entries also listed read_only (read-only wins) and tmpfs
// entries that are also the workspace or a read-only/read-write path.
func (p *Policy) Resolve(env ResolveEnv) (*Policy, error) {
	q := p.Clone()
	if q.Version == 0 {
		q.Version = Version
	}
	if errs := q.check(false); len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	r := &resolver{p: q, env: env}
	if r.env.Home == "" {
		for _, kv := range env.Environ {
			if v, ok := strings.CutPrefix(kv, "HOME="); ok {
				r.env.Home = v
			}
		}
	}
	if r.env.Exists == nil {
		r.env.Exists = func(p string) bool { _, err := os.Stat(p); return err == nil }
	}
	r.resolve()
	if len(r.errs) > 0 {
		return nil, joinErrors(r.errs)
	}
	if errs := q.check(true); len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return q, nil
}

type resolver struct {
	p          *Policy
	env        ResolveEnv
	errs       []*Error
	implicitWS bool // the workspace is the current directory by default
}

// unsafeImplicitWorkspace says why a directory must not become the
// workspace just because airlock was started there: the home directory
// (or a parent of it) holds the very credentials the sandbox hides, and a
// system directory would become writable on the host.
func unsafeImplicitWorkspace(ws, home string) string {
	if isAbs(home) && home != "/" {
		home = cleanPath(home)
		if ws == home {
			return "your home directory"
		}
		if strings.HasPrefix(home, ws+"/") {
			return "a parent of your home directory"
		}
	}
	for _, d := range append([]string{"/proc", "/sys", "/dev", "/boot", "/var", "/run"}, SystemDirs...) {
		if ws == d || strings.HasPrefix(d, ws+"/") {
			return "a system directory"
		}
	}
	return ""
}

func (r *resolver) add(field, format string, args ...any) {
	file, line, field := r.p.src.locate(field)
	r.errs = append(r.errs, &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// expand turns ~, ~/x, $HOME, ${HOME}/x into absolute cleaned paths.
func (r *resolver) expand(field, s string) string {
	if homeRelative(s) {
		if !isAbs(r.env.Home) {
			r.add(field, "%q: no home directory to expand it", s)
			return s
		}
		_, rest := splitHome(s)
		return cleanPath(r.env.Home + "/" + rest)
	}
	return cleanPath(s)
}

// resolve fills in defaults and makes every path absolute, stage by stage;
// problems are collected in r.errs.
func (r *resolver) resolve() {
	if !r.filesystem() {
		return
	}
	r.network()
	r.process()
	r.limits()
	r.secrets()
	r.auditFile()
}

// filesystem resolves the workspace and the path lists; false when there
// is no workspace to resolve the rest against.
func (r *resolver) filesystem() bool {
	p := r.p
	fs := &p.Filesystem
	r.implicitWS = fs.Workspace == "" && r.env.GuardCwd
	if fs.Rootfs != "" {
		fs.Rootfs = r.expand("filesystem.rootfs", fs.Rootfs)
	}
	switch ws := fs.Workspace; {
	case ws == "none":
	case ws == "" || !isAbs(ws) && !homeRelative(ws):
		if !isAbs(r.env.Cwd) {
			r.add("filesystem.workspace", "no absolute current directory to resolve %q against", ws)
			return false
		}
		fs.Workspace = cleanPath(r.env.Cwd + "/" + ws)
	default:
		fs.Workspace = r.expand("filesystem.workspace", ws)
	}
	if fs.Workspace == "/" {
		r.add("filesystem.workspace", "refusing to use / as the workspace (it would make the whole host writable); run from a project directory or set workspace: none")
	} else if r.implicitWS {
		if why := unsafeImplicitWorkspace(fs.Workspace, r.env.Home); why != "" {
			r.add("filesystem.workspace", "the current directory %s is %s: refusing to make it writable by default; run from a project directory, or name it explicitly as the workspace", fs.Workspace, why)
		}
	}

	ownRoot := fs.Rootfs != "" || fs.Image != ""
	if fs.Image != "" {
		// The image has its own home: the profile's private home (a
		// tmpfs at the caller's ~, there to hide the host's) would only
		// hide the image's.
		fs.Tmpfs = slices.DeleteFunc(slices.Clone(fs.Tmpfs), func(s string) bool { return s == "~" || s == "$HOME" || s == "${HOME}" })
	}
	fs.ReadOnly = r.paths("filesystem.read_only", fs.ReadOnly, ownRoot)
	fs.ReadWrite = r.paths("filesystem.read_write", fs.ReadWrite, false)
	fs.Deny = r.paths("filesystem.deny", fs.Deny, false)
	fs.Tmpfs = r.paths("filesystem.tmpfs", fs.Tmpfs, false)
	fs.ReadWrite = slices.DeleteFunc(fs.ReadWrite, func(s string) bool { return slices.Contains(fs.ReadOnly, s) })
	if !slices.Contains(fs.Tmpfs, "/tmp") {
		fs.Tmpfs = append([]string{"/tmp"}, fs.Tmpfs...)
	}
	fs.Tmpfs = slices.DeleteFunc(fs.Tmpfs, func(s string) bool {
		return s == fs.Workspace || slices.Contains(fs.ReadOnly, s) || slices.Contains(fs.ReadWrite, s) || s == "/"
	})
	if fs.ProtectConfig == nil {
		fs.ProtectConfig = boolPtr(true)
	}
	fs.WritableConfig = r.writableConfig(fs.WritableConfig)
	p.Caches = dedupe(p.Caches)
	if fs.WorkspaceMount == "" && fs.Image != "" && fs.Workspace != "none" {
		fs.WorkspaceMount = "/workspace"
	}
	if fs.WorkspaceMount != "" {
		fs.WorkspaceMount = cleanPath(fs.WorkspaceMount)
	}
	return true
}

// network defaults the mode from the lists and canonicalises the entries.
func (r *resolver) network() {
	n := &r.p.Network
	if n.Mode == "" {
		n.Mode = NetworkNone
		if len(n.Allow) > 0 {
			n.Mode = NetworkAllowlist
		}
	}
	n.Allow = canonicalEntries(n.Allow)
	n.Deny = canonicalEntries(n.Deny)
}

// process captures the allowed environment and settles the working
// directory and credentials.
func (r *resolver) process() {
	p := r.p
	fs, pr := &p.Filesystem, &p.Process
	pr.EnvAllow = dedupe(pr.EnvAllow)
	if r.env.Environ != nil {
		// Capture the caller's allowed variables, so the resolved policy
		// says what the sandbox gets even when a backend runs elsewhere
		// (a server passes the environment it wants, not its own).
		env := map[string]string{}
		for _, kv := range p.Environ(r.env.Environ) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		pr.Env = env
	}
	switch {
	case pr.Workdir != "":
		pr.Workdir = r.expand("process.workdir", pr.Workdir)
	case fs.Workspace != "none":
		pr.Workdir = fs.WorkspaceInside()
	default:
		pr.Workdir = "/"
	}
	if pr.UID == nil && r.env.UID >= 0 {
		u := r.env.UID
		pr.UID = &u
	}
	if pr.GID == nil && r.env.GID >= 0 {
		g := r.env.GID
		pr.GID = &g
	}
}

// limits turns the explicit "unlimited" of each limit into 0, which every
// backend reads as no limit.
func (r *resolver) limits() {
	l := &r.p.Limits
	noLimit(&l.Memory)
	noLimit(&l.CPUs)
	noLimit(&l.Pids)
	noLimit(&l.OpenFiles)
	noLimit(&l.Timeout)
	noLimit(&l.OutputBytes)
	noLimit(&l.DiskBytes)
}

func noLimit[T ByteSize | float64 | int | Duration](v *T) {
	if *v == Unlimited {
		*v = 0
	}
}

// secrets defaults each secret's variable name and resolves its file.
func (r *resolver) secrets() {
	for i := range r.p.Secrets {
		s := &r.p.Secrets[i]
		if s.Env == "" {
			s.Env = s.Name
		}
		if s.FromFile != "" {
			s.FromFile = r.expand(fmt.Sprintf("secrets[%d].from_file", i), s.FromFile)
		}
		s.Hosts = canonicalEntries(s.Hosts)
	}
}

// auditFile makes the audit file's path absolute ("-" is stderr).
func (r *resolver) auditFile() {
	p := r.p
	a := p.Audit.File
	if a == "" || a == "-" {
		return
	}
	switch {
	case homeRelative(a):
		p.Audit.File = r.expand("audit.file", a)
	case !isAbs(a):
		if !isAbs(r.env.Cwd) {
			r.add("audit.file", "no absolute current directory to resolve %q against", a)
			return
		}
		p.Audit.File = cleanPath(r.env.Cwd + "/" + a)
	default:
		p.Audit.File = cleanPath(a)
	}
}

// writableConfig makes writable_config entries absolute: ~ and absolute
// paths as everywhere, relative ones against the workspace.
func (r *resolver) writableConfig(in []string) []string {
	var out []string
	ws := r.p.Filesystem.WorkspacePath()
	for i, s := range in {
		f := fmt.Sprintf("filesystem.writable_config[%d]", i)
		switch {
		case isAbs(s) || homeRelative(s):
			s = r.expand(f, s)
		case ws == "":
			r.add(f, "%q is relative but there is no workspace to resolve it against", s)
			continue
		default:
			s = cleanPath(ws + "/" + s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// paths expands, cleans and de-duplicates a path list, dropping built-in
// optional paths missing on the host (and the system dirs when dropSystem).
func (r *resolver) paths(field string, in []string, dropSystem bool) []string {
	out := make([]string, 0, len(in))
	for i, s := range in {
		if dropSystem && slices.Contains(SystemDirs, s) {
			continue
		}
		if optionalPaths[s] && homeRelative(s) && !isAbs(r.env.Home) {
			continue
		}
		f := fmt.Sprintf("%s[%d]", field, i)
		e := r.expand(f, s)
		if optionalPaths[s] && !r.env.Exists(e) {
			continue
		}
		if field == "filesystem.read_only" && e == r.p.Filesystem.Workspace {
			r.add(f, "%s is the workspace (read-write); set workspace: none and list it here to make it read-only", e)
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func canonicalEntries(in []string) []string {
	var out []string
	for _, s := range in {
		if e, err := ParseNetworkEntry(s); err == nil {
			s = e.String()
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func isAbs(s string) bool { return strings.HasPrefix(s, "/") }

// cleanPath is path.Clean for slash paths (policies name Linux paths on
// every GOOS).
func cleanPath(s string) string { return path.Clean(s) }

// splitHome reports whether s starts with ~ or $HOME/${HOME} (followed by
// the end or a slash) and returns the rest after the slash.
func splitHome(s string) (bool, string) {
	for _, pre := range []string{"~", "$HOME", "${HOME}"} {
		if rest, ok := strings.CutPrefix(s, pre); ok && (rest == "" || rest[0] == '/') {
			return true, strings.TrimPrefix(rest, "/")
		}
	}
	return false, ""
}

func homeRelative(s string) bool { ok, _ := splitHome(s); return ok }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WorkspaceInside is where the workspace appears inside the sandbox:
// WorkspaceMount, or its host path; "" when there is none.
func (fs *Filesystem) WorkspaceInside() string {
	if fs.Workspace == "none" || fs.Workspace == "" {
		return ""
	}
	if fs.WorkspaceMount != "" {
		return fs.WorkspaceMount
	}
	return fs.Workspace
}

// Inside is where host path p shows in the sandbox: below the
// workspace's mount point when p is in a workspace mounted elsewhere
// (workspace_mount), else at p (host paths are mounted at their own
// place).
func (fs *Filesystem) Inside(p string) string {
	ws, in := fs.WorkspacePath(), fs.WorkspaceInside()
	if ws == "" || ws == in {
		return p
	}
	if p == ws {
		return in
	}
	if rest, ok := strings.CutPrefix(p, ws+"/"); ok {
		return in + "/" + rest
	}
	return p
}

// SandboxView is p as the sandbox sees it, for showing to those who
// must not learn the host's layout (an API tenant): host paths under the
// workspace become paths under its mount point, the root directory
// (rootfs) is left out. It changes nothing the sandbox gets.
func (p *Policy) SandboxView() *Policy {
	v := p.Clone()
	fs := &v.Filesystem
	in := func(l []string) []string {
		for i, s := range l {
			l[i] = p.Filesystem.Inside(s)
		}
		return l
	}
	fs.ReadOnly, fs.ReadWrite, fs.Deny, fs.Tmpfs, fs.WritableConfig = in(fs.ReadOnly), in(fs.ReadWrite), in(fs.Deny), in(fs.Tmpfs), in(fs.WritableConfig)
	if ws := p.Filesystem.WorkspaceInside(); ws != "" {
		fs.Workspace, fs.WorkspaceMount = ws, ""
	}
	fs.Rootfs = ""
	v.Process.Workdir = p.Filesystem.Inside(v.Process.Workdir)
	for k, val := range v.Process.Env {
		if isAbs(val) {
			v.Process.Env[k] = p.Filesystem.Inside(val)
		}
	}
	return v
}

// WorkspacePath returns the resolved workspace, or "" when there is none.
func (fs *Filesystem) WorkspacePath() string {
	if fs.Workspace == "none" {
		return ""
	}
	return fs.Workspace
}
