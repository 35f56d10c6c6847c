package policy

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// testEnv is a caller whose host has every path except those in missing.
func testEnv(missing ...string) ResolveEnv {
	return ResolveEnv{
		Cwd: "/home/alice/proj", Home: "/home/alice", UID: 1000, GID: 1001,
		Exists: func(p string) bool { return !slices.Contains(missing, p) },
	}
}

func mustParse(t *testing.T, y string) *Policy {
	t.Helper()
	p, err := Parse("p.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolveDefault(t *testing.T) {
	p, _ := Profile("default")
	r, err := p.Resolve(testEnv("/lib32", "/libx32", "/etc/sudoers.d"))
	if err != nil {
		t.Fatal(err)
	}
	fs := r.Filesystem
	if fs.Workspace != "/home/alice/proj" {
		t.Errorf("workspace = %q, want the cwd", fs.Workspace)
	}
	wantRO := []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/opt"}
	if !reflect.DeepEqual(fs.ReadOnly, wantRO) {
		t.Errorf("read_only = %q, want %q (missing system dirs dropped)", fs.ReadOnly, wantRO)
	}
	if slices.Contains(fs.Deny, "/etc/sudoers.d") || !slices.Contains(fs.Deny, "/etc/shadow") {
		t.Errorf("deny = %q", fs.Deny)
	}
	if !reflect.DeepEqual(fs.Tmpfs, []string{"/tmp", "/home/alice"}) {
		t.Errorf("tmpfs = %q, want /tmp and the (empty) home", fs.Tmpfs)
	}
	if fs.ProtectConfig == nil || !*fs.ProtectConfig {
		t.Error("protect_config not on")
	}
	if r.Network.Mode != NetworkNone {
		t.Errorf("network mode %q", r.Network.Mode)
	}
	if r.Process.Workdir != "/home/alice/proj" || *r.Process.UID != 1000 || *r.Process.GID != 1001 {
		t.Errorf("workdir %q uid %d gid %d", r.Process.Workdir, *r.Process.UID, *r.Process.GID)
	}
	l := r.Limits
	if l.Memory == 0 || l.CPUs == 0 || l.Pids == 0 || l.OpenFiles == 0 || l.Timeout == 0 || l.OutputBytes == 0 || l.DiskBytes == 0 {
		t.Errorf("default profile leaves a limit unset: %+v", l)
	}
	// Resolve must not modify its receiver.
	if p.Filesystem.Workspace != "" || len(p.Filesystem.ReadOnly) != len(SystemDirs) {
		t.Error("Resolve modified the policy it was called on")
	}
	// Resolving a resolved policy changes nothing.
	again, err := r.Resolve(testEnv("/lib32", "/libx32", "/etc/sudoers.d"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, r) {
		t.Errorf("Resolve is not idempotent:\n%+v\n%+v", again, r)
	}
}

func TestResolveExpands(t *testing.T) {
	p := mustParse(t, `
version: 1
filesystem:
  workspace: ../other/./ws/
  read_only: ["~", "~/datasets", "$HOME/models", "${HOME}/x/../y", /data//sets/, /data/sets]
  read_write: [/scratch, /data/sets]
  deny: [~/datasets/private]
  tmpfs: [/var/tmp, /tmp]
process:
  workdir: ~/other/ws/src
secrets:
  - {name: GH_TOKEN, from_file: ~/.config/gh/token, hosts: [API.GitHub.com]}
audit:
  file: logs/audit.jsonl
limits:
  memory: unlimited
  pids: 0
  timeout: none
network:
  allow: [Example.COM]
`)
	r, err := p.Resolve(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	fs := r.Filesystem
	if fs.Workspace != "/home/alice/other/ws" {
		t.Errorf("workspace = %q", fs.Workspace)
	}
	for _, want := range []string{"/home/alice", "/home/alice/datasets", "/home/alice/models", "/home/alice/y", "/data/sets"} {
		if !slices.Contains(fs.ReadOnly, want) {
			t.Errorf("read_only %q lacks %q", fs.ReadOnly, want)
		}
	}
	if n := strings.Count(strings.Join(fs.ReadOnly, " "), "/data/sets"); n != 1 {
		t.Errorf("read_only %q: /data/sets %d times, want deduplicated", fs.ReadOnly, n)
	}
	if !reflect.DeepEqual(fs.ReadWrite, []string{"/scratch"}) {
		t.Errorf("read_write = %q, want /scratch only (read-only wins)", fs.ReadWrite)
	}
	if !slices.Contains(fs.Deny, "/home/alice/datasets/private") {
		t.Errorf("deny = %q", fs.Deny)
	}
	// ~ is both the profile's tmpfs and listed read-only: the bind wins.
	if !reflect.DeepEqual(fs.Tmpfs, []string{"/tmp", "/var/tmp"}) {
		t.Errorf("tmpfs = %q", fs.Tmpfs)
	}
	if r.Process.Workdir != "/home/alice/other/ws/src" {
		t.Errorf("workdir = %q", r.Process.Workdir)
	}
	if s := r.Secrets[0]; s.Env != "GH_TOKEN" || s.FromFile != "/home/alice/.config/gh/token" || s.Hosts[0] != "api.github.com" {
		t.Errorf("secret = %+v", s)
	}
	if r.Audit.File != "/home/alice/proj/logs/audit.jsonl" {
		t.Errorf("audit file = %q", r.Audit.File)
	}
	if r.Limits.Memory != 0 || r.Limits.Pids != 0 || r.Limits.Timeout != 0 {
		t.Errorf("unlimited limits = %+v, want 0", r.Limits)
	}
	if r.Limits.OpenFiles == 0 {
		t.Error("open_files lost the profile's value")
	}
	if r.Network.Mode != NetworkAllowlist || r.Network.Allow[0] != "example.com" {
		t.Errorf("network = %+v, want allowlist implied by allow entries", r.Network)
	}
}

func TestResolveWorkspaceNone(t *testing.T) {
	p, _ := Profile("strict")
	r, err := p.Resolve(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if r.Filesystem.Workspace != "none" || r.Filesystem.WorkspacePath() != "" || r.Process.Workdir != "/" {
		t.Errorf("workspace %q workdir %q", r.Filesystem.Workspace, r.Process.Workdir)
	}
	if g := r.ConfigGuard(""); len(g.Homes) != 0 {
		t.Errorf("homes without a workspace: %q", g.Homes)
	}
}

func TestResolveRootfsDropsSystemDirs(t *testing.T) {
	p := mustParse(t, "version: 1\nfilesystem:\n  rootfs: ~/images/alpine\n  read_only: [/srv/data]\n")
	r, err := p.Resolve(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if r.Filesystem.Rootfs != "/home/alice/images/alpine" {
		t.Errorf("rootfs = %q", r.Filesystem.Rootfs)
	}
	if !reflect.DeepEqual(r.Filesystem.ReadOnly, []string{"/srv/data"}) {
		t.Errorf("read_only = %q, want only the file's path", r.Filesystem.ReadOnly)
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name string
		p    *Policy
		env  ResolveEnv
		want string
	}{
		{"no home", &Policy{Filesystem: Filesystem{ReadOnly: []string{"~/x"}}}, ResolveEnv{Cwd: "/w", UID: -1, GID: -1}, `filesystem.read_only[0]: "~/x": no home directory to expand it`},
		{"no cwd", &Policy{}, ResolveEnv{Home: "/h", UID: -1, GID: -1}, `filesystem.workspace: no absolute current directory`},
		{"relative cwd", &Policy{}, ResolveEnv{Cwd: "w", Home: "/h"}, `filesystem.workspace: no absolute current directory`},
		{"cwd is home", &Policy{}, ResolveEnv{Cwd: "/home/alice/", Home: "/home/alice", GuardCwd: true}, `filesystem.workspace: the current directory /home/alice is your home directory: refusing to make it writable by default`},
		{"cwd is /home", &Policy{}, ResolveEnv{Cwd: "/home", Home: "/home/alice", GuardCwd: true}, `the current directory /home is a parent of your home directory`},
		{"cwd is /etc", &Policy{}, ResolveEnv{Cwd: "/etc", Home: "/home/alice", GuardCwd: true}, `the current directory /etc is a system directory`},
		{"cwd is /usr", &Policy{}, ResolveEnv{Cwd: "/usr", Home: "/root", GuardCwd: true}, `the current directory /usr is a system directory`},
		{"workspace is /", &Policy{Filesystem: Filesystem{Workspace: "x/.."}}, ResolveEnv{Cwd: "/"}, `filesystem.workspace: refusing to use / as the workspace`},
		{"workspace read-only", &Policy{Filesystem: Filesystem{Workspace: "/w", ReadOnly: []string{"/w/"}}}, testEnv(), `filesystem.read_only[0]: /w is the workspace`},
		{"bad version", &Policy{Version: 3}, testEnv(), `version: unsupported version 3`},
		{"relative path", &Policy{Filesystem: Filesystem{Tmpfs: []string{"tmp"}}}, testEnv(), `filesystem.tmpfs[0]: "tmp" must be an absolute path`},
		{"nul", &Policy{Filesystem: Filesystem{Deny: []string{"/a\x00b"}}}, testEnv(), `filesystem.deny[0]: contains a NUL byte`},
		{"negative limit", &Policy{Limits: Limits{Memory: -7}}, testEnv(), `limits.memory: must not be negative`},
		{"uid", &Policy{Process: Process{UID: new(int)}, Backend: "qemu"}, testEnv(), `backend: unknown value "qemu"`},
		{"secret", &Policy{Secrets: []Secret{{Name: "A", FromEnv: "A"}}}, testEnv(), `secrets[0].hosts: required`},
		{"env", &Policy{Process: Process{Env: map[string]string{"A=B": "c"}}}, testEnv(), `process.env.A=B: "A=B" is not a valid variable name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.p.Resolve(tt.env)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Resolve error = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}

// Errors found by Resolve in a field a file set name the file, its line
// and the field as the file wrote it (indexes before the profile's list
// entries were prepended).
func TestResolveErrorNamesFileLine(t *testing.T) {
	p := mustParse(t, "version: 1\nfilesystem:\n  read_only:\n    - /opt\n    - ~/data\n")
	_, err := p.Resolve(ResolveEnv{Cwd: "/w", UID: -1, GID: -1})
	want := `p.yaml:5: filesystem.read_only[1]: "~/data": no home directory to expand it`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	p = mustParse(t, "version: 1\nprofile: strict\nfilesystem:\n  workspace: /w\n  read_only: [/x, /w]\n")
	_, err = p.Resolve(testEnv("/lib32", "/libx32")) // missing profile entries do not shift the index
	if want := "p.yaml:5: filesystem.read_only[1]: /w is the workspace"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v\nwant %s...", err, want)
	}
}

func TestMergeRule(t *testing.T) {
	base := &Policy{
		Backend:    "native",
		Filesystem: Filesystem{ReadOnly: []string{"/a"}, ProtectConfig: boolPtr(true)},
		Process:    Process{Env: map[string]string{"A": "1", "B": "1"}},
		Limits:     Limits{Memory: 100 << 20, Pids: 10},
	}
	over := &Policy{
		Filesystem: Filesystem{ReadOnly: []string{"/b"}, ProtectConfig: boolPtr(false)},
		Process:    Process{Env: map[string]string{"B": "2"}},
		Limits:     Limits{Memory: Unlimited},
	}
	m := Merge(base, over)
	if m.Backend != "native" || !reflect.DeepEqual(m.Filesystem.ReadOnly, []string{"/a", "/b"}) || *m.Filesystem.ProtectConfig {
		t.Errorf("merged = %+v", m)
	}
	if !reflect.DeepEqual(m.Process.Env, map[string]string{"A": "1", "B": "2"}) {
		t.Errorf("env = %v", m.Process.Env)
	}
	if m.Limits.Memory != Unlimited || m.Limits.Pids != 10 {
		t.Errorf("limits = %+v", m.Limits)
	}
	if base.Filesystem.ReadOnly[0] != "/a" || len(base.Filesystem.ReadOnly) != 1 || base.Process.Env["B"] != "1" || !*base.Filesystem.ProtectConfig {
		t.Error("Merge modified base")
	}
}

func TestValidateResolved(t *testing.T) {
	p, _ := Profile("coding-agent")
	if err := p.ValidateResolved(); err == nil {
		t.Error("an unresolved profile passes ValidateResolved")
	}
	r, err := p.Resolve(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ValidateResolved(); err != nil {
		t.Errorf("resolved policy fails ValidateResolved: %v", err)
	}
	bad := r.Clone()
	bad.Filesystem.Workspace = "relative/dir"
	if err := bad.ValidateResolved(); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `filesystem.workspace: "relative/dir" must be an absolute path`) {
		t.Errorf("relative workspace: %v", err)
	}
	bad = r.Clone()
	bad.Filesystem.ReadOnly = append(bad.Filesystem.ReadOnly, "~/x", "/a/../b")
	if err := bad.ValidateResolved(); err == nil || !strings.Contains(err.Error(), `"~/x" must be an absolute path`) || !strings.Contains(err.Error(), `"/a/../b" is not clean`) {
		t.Errorf("unexpanded path: %v", err)
	}
	bad = r.Clone()
	bad.Limits.Memory = Unlimited
	if err := bad.ValidateResolved(); err == nil || !strings.Contains(err.Error(), "limits.memory: must not be negative") {
		t.Errorf("Unlimited left in: %v", err)
	}
}

// Naming the home directory (or a system directory) as the workspace is the
// user's choice; only the implicit current-directory default refuses it.
func TestResolveExplicitWorkspace(t *testing.T) {
	for _, ws := range []string{"~", "/home/alice", ".", "/usr/local/src"} {
		p := &Policy{Filesystem: Filesystem{Workspace: ws}}
		if _, err := p.Resolve(ResolveEnv{Cwd: "/home/alice", Home: "/home/alice", GuardCwd: true}); err != nil {
			t.Errorf("workspace %q: %v", ws, err)
		}
	}
	if _, err := (&Policy{}).Resolve(ResolveEnv{Cwd: "/usr/local/src/x", Home: "/home/alice", GuardCwd: true}); err != nil {
		t.Errorf("a project under /usr/local: %v", err)
	}
	// Without GuardCwd (a server that makes a fresh workspace and uses it
	// as HOME too), the current directory may be the home directory.
	if _, err := (&Policy{}).Resolve(ResolveEnv{Cwd: "/srv/ws/1", Home: "/srv/ws/1"}); err != nil {
		t.Errorf("server-style env: %v", err)
	}
}

// Resolve captures the caller's environment: the resolved policy carries
// the values, so a backend computing Environ from its own process (a
// server) still gives the sandbox what the caller meant.
func TestResolveCapturesEnviron(t *testing.T) {
	p, _ := Profile("default")
	p.Process.Env = map[string]string{"CI": "1"}
	env := testEnv()
	env.Environ = []string{"PATH=/opt/bin:/usr/bin", "HOME=/home/alice", "LANG=C.UTF-8", "GITHUB_TOKEN=ghp_x", "OPENAI_API_KEY=sk", "EDITOR=vi"}
	r, err := p.Resolve(env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"PATH": "/opt/bin:/usr/bin", "HOME": "/home/alice", "LANG": "C.UTF-8", "CI": "1"}
	if !reflect.DeepEqual(r.Process.Env, want) {
		t.Errorf("env = %v, want %v", r.Process.Env, want)
	}
	// A backend's own environment cannot override what was captured.
	got := r.Environ([]string{"PATH=/server/bin", "HOME=/root", "TERM=xterm", "AWS_SECRET_ACCESS_KEY=x"})
	wantEnv := []string{"CI=1", "HOME=/home/alice", "LANG=C.UTF-8", "PATH=/opt/bin:/usr/bin", "TERM=xterm"}
	if !reflect.DeepEqual(got, wantEnv) {
		t.Errorf("Environ = %q, want %q", got, wantEnv)
	}
	if p.Process.Env["PATH"] != "" {
		t.Error("Resolve modified its receiver's env")
	}
}
