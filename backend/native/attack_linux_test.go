package native

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

var (
	attackOnce sync.Once
	attackBin  string
	attackErr  error
)

// attackBinary builds testdata/attack once (static, so it runs anywhere).
func attackBinary(t testing.TB) string {
	t.Helper()
	attackOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-attack-")
		if err != nil {
			attackErr = err
			return
		}
		os.Chmod(dir, 0o755)
		attackBin = filepath.Join(dir, "attack")
		cmd := exec.Command("go", "build", "-o", attackBin, "./testdata/attack")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			attackErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if attackErr != nil {
		t.Fatalf("build attack helper: %v", attackErr)
	}
	return attackBin
}

// armed copies the attack helper into ws and returns its path there.
func armed(t testing.TB, ws string) string {
	t.Helper()
	data, err := os.ReadFile(attackBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, "attack")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// unconfined runs the attack unconfined and returns its output.
func unconfined(t testing.TB, bin string, args ...string) string {
	t.Helper()
	out, _ := exec.Command(bin, args...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

type fixture struct {
	b     *Backend
	ws    string
	att   string
	sb    sandbox.Sandbox
	audit *eventLog
}

func newFixture(t *testing.T, edit func(ws string, p *policy.Policy), prep func(ws string)) *fixture {
	t.Helper()
	b := testBackend(t)
	ws := workspace(t)
	if prep != nil {
		prep(ws)
	}
	f := &fixture{b: b, ws: ws, att: armed(t, ws), audit: newEventLog()}
	pol := testPolicy(t, ws, func(p *policy.Policy) {
		if edit != nil {
			edit(ws, p)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: pol, Audit: f.audit})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	f.sb = sb
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return f
}

// attack runs the helper inside and returns its output.
func (f *fixture) attack(t *testing.T, args ...string) string {
	t.Helper()
	_, out := sh(t, f.sb, shellQuote(append([]string{f.att}, args...)))
	return out
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func mustOK(t *testing.T, what, out string) {
	t.Helper()
	if !strings.HasSuffix(out, "OK") {
		t.Fatalf("%s: want it to work, got %q", what, out)
	}
}

func mustDeny(t *testing.T, what, out string, reasons ...string) {
	t.Helper()
	if !strings.Contains(out, "DENIED") {
		t.Fatalf("%s: want denied, got %q", what, out)
	}
	for _, r := range reasons {
		if strings.Contains(out, r) {
			return
		}
	}
	if len(reasons) > 0 {
		t.Fatalf("%s: denied for the wrong reason: %q (want one of %q)", what, out, reasons)
	}
}

func TestAttackFilesystem(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("PRIVATE"), 0o600)
	outside := t.TempDir()
	f := newFixture(t, func(ws string, p *policy.Policy) {
		p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(ws, "secret.txt"), filepath.Join(ws, "private"))
		p.Filesystem.Tmpfs = append(p.Filesystem.Tmpfs, home)
	}, func(ws string) {
		os.WriteFile(filepath.Join(ws, "secret.txt"), []byte("s3cret"), 0o644)
		os.Mkdir(filepath.Join(ws, "private"), 0o755)
		os.WriteFile(filepath.Join(ws, "private", "key"), []byte("k"), 0o644)
	})
	cases := []struct {
		name string
		args []string
	}{
		{"read denied file", []string{"read", filepath.Join(f.ws, "secret.txt")}},
		{"read file in denied dir", []string{"read", filepath.Join(f.ws, "private", "key")}},
		{"read ~/.ssh", []string{"read", filepath.Join(home, ".ssh", "id_ed25519")}},
		{"read /etc/shadow", []string{"read", "/etc/shadow"}},
		{"write outside workspace", []string{"write", filepath.Join(outside, "x")}},
		{"write /etc", []string{"write", "/etc/airlock-attack"}},
		{"write /usr/bin", []string{"write", "/usr/bin/airlock-attack"}},
		{"write /", []string{"write", "/airlock-attack"}},
		{"write /proc/sys", []string{"write", "/proc/sys/kernel/hostname"}},
		{"write /dev", []string{"write", "/dev/airlock-attack"}},
	}
	// A root-only host secret (the sandbox runs as host root here): the
	// first that exists on this host.
	for _, p := range rootOnlySecrets() {
		var files []string
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			files, _ = filepath.Glob(filepath.Join(p, "*"))
		} else if err == nil {
			files = []string{p}
		}
		if len(files) > 0 {
			cases = append(cases, struct {
				name string
				args []string
			}{"read root-only " + files[0], []string{"read", files[0]}})
			break
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.args[0], "read") || strings.HasPrefix(c.args[1], outside) {
				mustOK(t, "unconfined", unconfined(t, f.att, c.args...))
			}
			mustDeny(t, "sandboxed", f.attack(t, c.args...))
		})
	}
	os.Remove(filepath.Join(outside, "x"))
	// The workspace and /tmp stay writable.
	mustOK(t, "write workspace", f.attack(t, "write", filepath.Join(f.ws, "out.txt")))
	mustOK(t, "write /tmp", f.attack(t, "write", "/tmp/x"))
	if b, _ := os.ReadFile(filepath.Join(f.ws, "out.txt")); string(b) != "attack\n" {
		t.Fatalf("workspace write not visible on the host: %q", b)
	}
	for _, d := range []string{"/root", home} {
		if _, out := sh(t, f.sb, "ls -A "+d+" | wc -l"); out != "0" {
			t.Fatalf("home directory %s is not empty inside: %q", d, out)
		}
	}
}

// protectedAttacks are writes that plant code a host program runs later,
// at the workspace root and below: each must work unconfined and be
// refused inside. Paths are relative to a directory holding a git
// repository (made by gitLayout).
var protectedAttacks = []struct{ name, script string }{
	{"hook", "printf '#!/bin/sh\\necho pwned\\n' > R/.git/hooks/pre-commit && chmod +x R/.git/hooks/pre-commit"},
	{"chmod +x an existing hook", "chmod +x R/.git/hooks/post-checkout"},
	{"git config fsmonitor", "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> R/.git/config"},
	{"git config via git", "git -C R/. config core.fsmonitor 'touch /tmp/pwned'"},
	{"config via rename", "echo '[core]' > R/.git/c.new && mv R/.git/c.new R/.git/config"},
	{"config through a symlink", "ln -s .git/config R/link && echo '[alias]' >> R/link"},
	{"config through a hard link", "ln R/.git/config R/hard && echo '[alias]' >> R/hard"},
	{"info/attributes", "mkdir -p R/.git/info && echo '* filter=x' > R/.git/info/attributes"},
	{"new repository", "git init -q R/new && git -C R/new config core.fsmonitor 'touch /tmp/pwned'"},
	{"bare repository config", "git init -q --bare R/bare.git && printf '[core]\\n' >> R/bare.git/config"},
	{"envrc", "echo 'touch /tmp/pwned' > R/.envrc"},
	{"vscode tasks", "mkdir -p R/.vscode && echo '{}' > R/.vscode/tasks.json"},
	{"vscode dir swap", "mkdir -p R/x && echo '{}' > R/x/settings.json && mv R/x R/.vscode2 && mkdir -p R/.vscode && mv -T R/.vscode2 R/.vscode"},
	{"claude settings", "mkdir -p R/.claude && echo '{}' > R/.claude/settings.json"},
	{"mcp.json", "echo '{}' > R/.mcp.json"},
	{"idea", "mkdir -p R/.idea && echo x > R/.idea/workspace.xml"},
	{"set-uid file", "cp /bin/true R/tool && chmod 4755 R/tool"},
	{"set-gid directory", "mkdir -p R/sgid && chmod 2775 R/sgid"},
	{"set-uid at creation", "python3 -c \"import os; os.close(os.open('R/suid', os.O_CREAT|os.O_WRONLY, 0o4755))\" && test -u R/suid"},
}

// gitLayout makes dir a git repository with a disabled hook sample and one
// commit.
func gitLayout(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q", dir},
		{"-C", dir, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(dir, ".git/hooks/post-checkout"), []byte("#!/bin/sh\nexit 0\n"), 0o644)
}

// snapshot lists a tree's names, modes, owners and sizes.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v %d:%d %d\n", strings.TrimPrefix(p, root), fi.Mode(), st.Uid, st.Gid, fi.Size())
		return nil
	})
	return b.String()
}

// TestAttackProtectedConfig plants host-run code at depth 0, 1 and 3 of
// the workspace: each attack works unconfined on a copy, is refused
// inside, and leaves the workspace exactly as it was.
func TestAttackProtectedConfig(t *testing.T) {
	for _, depth := range []string{".", "a", "a/b/c"} {
		t.Run("depth "+depth, func(t *testing.T) {
			f := newFixture(t, nil, func(ws string) { gitLayout(t, filepath.Join(ws, depth)) })
			scratch := t.TempDir()
			before := snapshot(t, f.ws)
			for _, a := range protectedAttacks {
				t.Run(a.name, func(t *testing.T) {
					dir := filepath.Join(scratch, strings.ReplaceAll(a.name, " ", "-"))
					gitLayout(t, dir)
					script := strings.ReplaceAll(a.script, "R/", dir+"/")
					if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
						t.Fatalf("unconfined the attack fails (test is broken): %v %s", err, out)
					}
					script = strings.ReplaceAll(a.script, "R/", filepath.Join(f.ws, depth)+"/")
					st, out := sh(t, f.sb, "if ("+script+"); then echo ESCAPED; fi")
					if strings.Contains(out, "ESCAPED") {
						t.Fatalf("attack succeeded inside: %+v %q", st, out)
					}
					if !strings.Contains(strings.ToLower(out), "permission denied") && !strings.Contains(strings.ToLower(out), "not permitted") {
						t.Errorf("refusal does not read as a permission error: %q", out)
					}
				})
			}
			// Only the attacks' harmless leftovers may differ: none of the
			// protected names, and nothing set-id.
			after := snapshot(t, f.ws)
			for _, line := range strings.Split(after, "\n") {
				if line == "" || strings.Contains(before, line+"\n") {
					continue
				}
				for _, bad := range []string{"/hooks/pre-commit ", "/.envrc", "/.vscode/tasks.json", "/.vscode/settings.json", "/.claude/settings.json", ".mcp.json", "/.idea/", "rwsr", "rwxrwsr", "/new/.git/config", "/bare.git/config"} {
					if strings.Contains(line, bad) {
						t.Errorf("planted on the host: %s", line)
					}
				}
				if strings.Contains(line, "/.git/config ") || strings.Contains(line, "/.git/hooks/post-checkout ") {
					t.Errorf("protected file changed: %s", line)
				}
			}
			// The refusals were audited with their rule.
			rules := map[string]bool{}
			f.audit.mu <- struct{}{}
			for _, e := range f.audit.events {
				if e.Type == audit.TypeDenied {
					rules[fmt.Sprint(e.Fields["rule"])] = true
				}
			}
			<-f.audit.mu
			for _, r := range []string{policy.RuleGitHooks, policy.RuleGitConfig, policy.RuleEnvrc, policy.RuleEditor, policy.RuleAgent, policy.RuleGitNewRepo, policy.RuleSetID} {
				if !rules[r] {
					t.Errorf("no denied event for rule %s (have %v)", r, rules)
				}
			}
		})
	}
}

// TestGitWorkflows: ordinary git work inside a protected workspace.
func TestGitWorkflows(t *testing.T) {
	f := newFixture(t, nil, func(ws string) { gitLayout(t, ws) })
	script := `set -e
cd ` + f.ws + `
git() { command git -c user.email=a@b -c user.name=a "$@"; }
echo one > a.txt; mkdir -p d/e; echo two > d/e/f.txt
git add -A && git commit -qm first
git checkout -qb feature; echo three >> a.txt; git commit -qam second
git checkout -q master 2>/dev/null || git checkout -q main
git merge -q feature
echo wip > untracked.txt; echo dirty >> a.txt
git stash -u -q && test ! -e untracked.txt && git stash pop -q && test -e untracked.txt
git add -A && git commit -qm third
git worktree add -q wt feature2 2>/dev/null || git worktree add -q -b feature2 wt
echo four > wt/b.txt; git -C wt add b.txt; git -C wt commit -qm fourth
git worktree remove wt
git branch -D feature2 >/dev/null
git gc -q
echo STATUS; git status --porcelain; echo DONE`
	st, out := sh(t, f.sb, script)
	if st.Code != 0 || !strings.HasSuffix(out, "DONE") {
		t.Fatalf("git workflow inside: %+v\n%s", st, out)
	}
	if _, status, _ := strings.Cut(out, "STATUS\n"); strings.TrimSpace(strings.TrimSuffix(status, "DONE")) != "" {
		t.Errorf("git status not clean: %q", status)
	}
	// The host's git sees the same history.
	log, err := exec.Command("git", "-C", f.ws, "log", "--oneline").CombinedOutput()
	if err != nil || strings.Count(string(log), "\n") < 4 {
		t.Fatalf("host git log: %v %s", err, log)
	}
}

func TestAttackNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	f := newFixture(t, nil, nil)
	mustOK(t, "unconfined connect", unconfined(t, f.att, "connect", ln.Addr().String()))
	mustDeny(t, "connect to host listener", f.attack(t, "connect", ln.Addr().String()), "refused")
	mustDeny(t, "connect out", f.attack(t, "connect", "1.1.1.1:443"), "unreachable")
	out := f.attack(t, "interfaces")
	mustOK(t, "list interfaces", out)
	if strings.Count(out, "if:") != 1 || !strings.Contains(out, "if: lo") {
		t.Fatalf("want only lo, got %q", out)
	}
}

func TestAttackKernel(t *testing.T) {
	f := newFixture(t, nil, nil)
	// Unconfined these syscalls are reachable (any error but EPERM).
	if out := unconfined(t, f.att, "unshare-user"); !strings.HasSuffix(out, "OK") {
		t.Fatalf("unconfined unshare-user+mount: %q", out)
	}
	for _, c := range []string{"bpf", "keyctl"} {
		if out := unconfined(t, f.att, c); strings.Contains(out, "operation not permitted") {
			t.Fatalf("unconfined %s already EPERM: %q", c, out)
		}
	}
	mustOK(t, "unconfined memfd exec", unconfined(t, f.att, "memfd-exec"))
	if HostFeatures().Rootless {
		t.Log("memfd exec is only blocked with a root-owned init (vm.memfd_noexec)")
	} else {
		mustDeny(t, "sandboxed memfd exec", f.attack(t, "memfd-exec"), "permission denied")
	}
	before, _ := f.sb.Stats(context.Background())
	cases := [][]string{
		{"ptrace", "1"},
		{"procmem", "1"},
		{"unshare"},
		{"unshare-user"},
		{"mount-tmpfs", "/tmp"},
		{"remount-rw", "/usr"},
		{"umount", "/usr"},
		{"bpf"},
		{"keyctl"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			mustDeny(t, "sandboxed", f.attack(t, c...), "operation not permitted", "permission denied")
		})
	}
	// TIOCSTI through a terminal the sandbox owns.
	t.Run("tiocsti", func(t *testing.T) {
		var out strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, err := f.sb.Exec(ctx, sandbox.ExecRequest{Args: []string{f.att, "tiocsti", "/dev/stdin"}, TTY: true, Stdout: &out, Rows: 24, Cols: 80})
		if err != nil {
			t.Fatal(err)
		}
		p.Wait(ctx)
		mustDeny(t, "sandboxed", out.String(), "operation not permitted")
	})
	// Seccomp-denied calls are counted and audited: ptrace, unshare (x2:
	// unshare and clone with CLONE_NEWUSER), mount, umount2, bpf, keyctl,
	// TIOCSTI; remount and procmem are stopped by capabilities and
	// dumpability before any filter. The supervisor counts them as it
	// reads its notifications: wait for it (a loaded host lags).
	after, _ := f.sb.Stats(context.Background())
	for end := time.Now().Add(20 * time.Second); after.Violations-before.Violations < 7 && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
		after, _ = f.sb.Stats(context.Background())
	}
	if after.Violations-before.Violations < 7 {
		t.Fatalf("violations %d -> %d, want at least 7 more", before.Violations, after.Violations)
	}
	names := map[string]bool{}
	f.audit.mu <- struct{}{}
	for _, e := range f.audit.events {
		if e.Type == audit.TypeViolation {
			names[fmt.Sprint(e.Fields["syscall"])] = true
		}
	}
	<-f.audit.mu
	for _, want := range []string{"ptrace", "bpf", "keyctl", "mount", "ioctl(TIOCSTI)"} {
		if !names[want] {
			t.Errorf("no violation event for %s (have %v)", want, names)
		}
	}
}

// An existing directory holding protected entries cannot be renamed away
// (config-dir-away), so no replacement takes its name, and a directory
// of that name elsewhere cannot be renamed onto it either.
func TestAttackProtectedConfigAnchorRename(t *testing.T) {
	layout := func(ws string) {
		for _, d := range []string{".vscode", ".claude"} {
			if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(ws, ".vscode/settings.json"), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, nil, layout)
	scratch := t.TempDir()
	layout(scratch)
	mustOK(t, "unconfined replace .vscode", unconfined(t, f.att, "replace-dir", filepath.Join(scratch, ".vscode"), "settings.json"))

	for _, d := range []string{".vscode", ".claude"} {
		mustDeny(t, "replace "+d, f.attack(t, "replace-dir", filepath.Join(f.ws, d), "settings.json"))
	}
	mustDeny(t, "rename back", f.attack(t, "rename", filepath.Join(f.ws, ".vscode.moved"), filepath.Join(f.ws, ".vscode")))
	if b, err := os.ReadFile(filepath.Join(f.ws, ".vscode/settings.json")); err != nil || string(b) != "{}\n" {
		t.Fatalf("the host's .vscode/settings.json: %q, %v; want the original, untouched", b, err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, ".vscode.moved")); err == nil {
		t.Fatal(".vscode was moved away")
	}
	// Unprotected files in such a directory stay writable.
	mustOK(t, "write .claude/notes.txt", f.attack(t, "write", filepath.Join(f.ws, ".claude/notes.txt")))
}

// Every process in the sandbox starts with every capability set empty,
// the bounding set included (it is dropped on the agent's spawn thread, not
// on every thread of the init), whether started directly or by a child.
func TestCapabilitySetsEmpty(t *testing.T) {
	f := newFixture(t, nil, nil)
	// Unconfined, this test process (root) has a full bounding set.
	if b, err := os.ReadFile("/proc/self/status"); err != nil || strings.Contains(string(b), "CapBnd:\t0000000000000000") {
		t.Fatalf("host process: %v, bounding set already empty: the check below would prove nothing", err)
	}
	for _, script := range []string{
		"grep ^Cap /proc/self/status",
		"sh -c 'grep ^Cap /proc/self/status'",
		"(sleep 0.1; grep ^Cap /proc/self/status) & wait",
	} {
		st, out := sh(t, f.sb, script)
		if st.Code != 0 {
			t.Fatalf("%s: %+v %q", script, st, out)
		}
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if !strings.Contains(out, set+":\t0000000000000000") {
				t.Errorf("%s: %s not empty:\n%s", script, set, out)
			}
		}
	}
}

// A worktree's .git file (which names the real git directory) may be
// rewritten: a git directory it could point to inside the workspace never
// has a config written from inside (TestAttackProtectedConfig).
func TestWorktreeGitFileWritable(t *testing.T) {
	f := newFixture(t, nil, func(ws string) {
		os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: /nonexistent/main/.git/worktrees/x\n"), 0o644)
	})
	mustOK(t, "rewrite .git file", f.attack(t, "write", filepath.Join(f.ws, ".git")))
}
