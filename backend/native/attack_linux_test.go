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

func TestAttackProtectedConfig(t *testing.T) {
	f := newFixture(t, nil, func(ws string) {
		if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		os.WriteFile(filepath.Join(ws, ".profile"), []byte("# mine\n"), 0o644)
	})
	ws := f.ws
	// Unconfined, all of these work (checked on a copy of the layout).
	scratch := t.TempDir()
	exec.Command("git", "init", "-q", scratch).Run()
	mustOK(t, "unconfined hook", unconfined(t, f.att, "write", filepath.Join(scratch, ".git/hooks/pre-commit")))
	mustOK(t, "unconfined rename .git", unconfined(t, f.att, "rename", filepath.Join(scratch, ".git"), filepath.Join(scratch, "g")))

	for _, c := range []struct{ name, cmd, a, b string }{
		{"create .git/hooks/pre-commit", "write", ".git/hooks/pre-commit", ""},
		{"append .git/config", "append", ".git/config", ""},
		{"replace .git/config", "write", ".git/config", ""},
		{"create .bashrc", "write", ".bashrc", ""},
		{"append existing .profile", "append", ".profile", ""},
		{"create .vscode/settings.json", "write", ".vscode/settings.json", ""},
		{"create .claude/settings.json", "write", ".claude/settings.json", ""},
		{"rename .git", "rename", ".git", "git-moved"},
		{"rename .git/hooks", "rename", ".git/hooks", ".git/hooks2"},
		{"remove .bashrc", "remove", ".bashrc", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{c.cmd, filepath.Join(ws, c.a)}
			if c.b != "" {
				args = append(args, filepath.Join(ws, c.b))
			}
			mustDeny(t, "sandboxed", f.attack(t, args...))
		})
	}
	// Ordinary work in the repository still works.
	mustOK(t, "write object", f.attack(t, "write", filepath.Join(ws, ".git/objects/x")))
	if st, out := sh(t, f.sb, "cd "+ws+" && git add attack && git -c user.email=a@b -c user.name=a commit -qm x && echo committed"); st.Code != 0 || !strings.HasSuffix(out, "committed") {
		t.Fatalf("git commit inside: %+v %q", st, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".profile")); string(b) != "# mine\n" {
		t.Fatalf(".profile changed: %q", b)
	}
	// Placeholders exist on the host while the sandbox runs, and are gone
	// after Destroy.
	if _, err := os.Stat(filepath.Join(ws, ".bashrc")); err != nil {
		t.Fatalf("placeholder .bashrc missing while running: %v", err)
	}
	f.sb.Destroy(context.Background())
	for _, p := range []string{".bashrc", ".vscode", ".claude", ".zshrc", ".envrc"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("placeholder %s left behind", p)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/config")); err != nil {
		t.Errorf(".git/config gone: %v", err)
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
	after, _ := f.sb.Stats(context.Background())
	// Seccomp-denied calls are counted and audited: ptrace, unshare (x2:
	// unshare and clone with CLONE_NEWUSER), mount, umount2, bpf, keyctl,
	// TIOCSTI; remount and procmem are stopped by capabilities and
	// dumpability before any filter.
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

// An existing directory holding protected entries cannot be renamed away and
// re-created without them (the sandbox would then write the host's
// .vscode/settings.json through the new directory).
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
	mustDeny(t, "write .vscode/settings.json", f.attack(t, "write", filepath.Join(f.ws, ".vscode/settings.json")))
	if b, _ := os.ReadFile(filepath.Join(f.ws, ".vscode/settings.json")); string(b) != "{}\n" {
		t.Fatalf(".vscode/settings.json changed on the host: %q", b)
	}
	// Unprotected files in the anchor directory stay writable.
	mustOK(t, "write .vscode/extensions-notes.txt", f.attack(t, "write", filepath.Join(f.ws, ".vscode/extensions-notes.txt")))
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

// A workspace that is not a git repository cannot be made one from inside
// (its .git/config could later run code through a git prompt on the host),
// and a worktree's .git file cannot be pointed elsewhere.
func TestAttackGitOutsideRepository(t *testing.T) {
	t.Run("plain workspace", func(t *testing.T) {
		f := newFixture(t, nil, nil)
		scratch := t.TempDir()
		if out, err := exec.Command("git", "init", "-q", scratch).CombinedOutput(); err != nil {
			t.Fatalf("unconfined git init: %v %s", err, out)
		}
		mustOK(t, "unconfined write .git/config", unconfined(t, f.att, "write", filepath.Join(scratch, ".git/config")))
		st, out := sh(t, f.sb, "cd "+f.ws+" && git init -q . 2>&1; mkdir .git 2>&1; echo '[core] fsmonitor = evil' > .git/config 2>&1; true")
		if st.Code != 0 {
			t.Fatalf("%+v %q", st, out)
		}
		if _, err := os.Stat(filepath.Join(f.ws, ".git/config")); err == nil {
			t.Fatalf("a .git/config was created in the workspace from inside: %q", out)
		}
		f.sb.Destroy(context.Background())
		if _, err := os.Lstat(filepath.Join(f.ws, ".git")); err == nil {
			t.Errorf(".git placeholder left behind")
		}
	})
	t.Run("worktree .git file", func(t *testing.T) {
		f := newFixture(t, nil, func(ws string) {
			os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: /nonexistent/main/.git/worktrees/x\n"), 0o644)
		})
		mustDeny(t, "rewrite .git file", f.attack(t, "write", filepath.Join(f.ws, ".git")))
		mustDeny(t, "remove .git file", f.attack(t, "remove", filepath.Join(f.ws, ".git")))
		if b, _ := os.ReadFile(filepath.Join(f.ws, ".git")); !strings.HasPrefix(string(b), "gitdir: /nonexistent/") {
			t.Fatalf(".git file changed on the host: %q", b)
		}
	})
}
