package gvisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// Each attack first works unconfined (on the host, as this test process),
// then fails from inside a sandbox.

func TestDenyPathUnreadable(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	secretDir := filepath.Join(ws, "secrets")
	os.Mkdir(secretDir, 0o755)
	os.WriteFile(filepath.Join(secretDir, "key"), []byte("TOPSECRET"), 0o644)
	os.WriteFile(filepath.Join(ws, "token"), []byte("TOPSECRET"), 0o644)
	if data, err := os.ReadFile(filepath.Join(secretDir, "key")); err != nil || string(data) != "TOPSECRET" {
		t.Fatalf("unconfined read failed: %v", err)
	}
	pol := testPolicy(t, ws, func(p *policy.Policy) {
		p.Filesystem.Deny = append(p.Filesystem.Deny, secretDir, filepath.Join(ws, "token"))
	})
	sb := create(t, b, sandbox.Spec{Policy: pol})
	for _, attack := range []string{
		"cat secrets/key", "cat token", "cat /etc/shadow",
		`python3 -c "import os; print(os.listdir('secrets'))"`,
		"chmod 644 token && cat token", "mv token t2 && cat t2", "rm -f token; cat token",
	} {
		st, out := sh(t, sb, attack)
		if st.Code == 0 || strings.Contains(out, "TOPSECRET") || strings.Contains(out, "root:") {
			t.Errorf("%q inside: status %+v output %q: denied path readable", attack, st, out)
		}
	}
	if _, err := sb.Files().ReadFile(context.Background(), secretDir+"/key"); err == nil {
		t.Error("Files().ReadFile of a denied path succeeded")
	}
	// Host files are untouched.
	if data, _ := os.ReadFile(filepath.Join(ws, "token")); string(data) != "TOPSECRET" {
		t.Errorf("denied file changed on the host: %q", data)
	}
}

func TestWritesConfinedToWorkspace(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	roDir := t.TempDir()
	hidden := t.TempDir()
	for _, d := range []string{roDir, hidden} {
		if err := os.WriteFile(filepath.Join(d, "probe"), []byte("host"), 0o644); err != nil {
			t.Fatalf("unconfined write to %s failed: %v", d, err)
		}
	}
	pol := testPolicy(t, ws, func(p *policy.Policy) { direct(p); p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, roDir) })
	sb := create(t, b, sandbox.Spec{Policy: pol})
	if st, out := sh(t, sb, "echo in > inside.txt && cat inside.txt"); st.Code != 0 || out != "in" {
		t.Fatalf("write to the workspace: %+v %q", st, out)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "inside.txt")); string(data) != "in\n" {
		t.Fatalf("workspace write not on the host: %q", data)
	}
	for _, attack := range []string{
		"echo x > " + roDir + "/probe", "rm " + roDir + "/probe", "touch " + roDir + "/new",
		"echo x > /usr/airlock-escape", "echo x > /etc/airlock-escape", "touch /airlock-escape",
		"mkdir /.airlock/x", "echo x > /.airlock/airlock", "cat " + hidden + "/probe",
		"umount " + roDir, "mount -o remount,rw " + roDir,
	} {
		if st, out := sh(t, sb, attack); st.Code == 0 {
			t.Errorf("%q inside succeeded: %q", attack, out)
		}
	}
	if st, out := sh(t, sb, "cat "+roDir+"/probe"); st.Code != 0 || out != "host" {
		t.Errorf("read_only path not readable: %+v %q", st, out)
	}
	if data, _ := os.ReadFile(filepath.Join(roDir, "probe")); string(data) != "host" {
		t.Errorf("read-only file changed on the host: %q", data)
	}
	for _, p := range []string{"/usr/airlock-escape", "/etc/airlock-escape", "/airlock-escape"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s created on the host", p)
		}
	}
}

// TestProtectedConfigWriteBack: with protect_config, the workspace sits in
// an overlay while the sandbox runs (nothing reaches the host), and Sync
// brings back every change but the protected ones, at any depth.
func TestProtectedConfigWriteBack(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	for _, d := range []string{".", "a/b/c"} {
		dir := filepath.Join(ws, d)
		os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)
		os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755)
		os.MkdirAll(filepath.Join(dir, ".git", "refs"), 0o755)
		os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
		os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("[core]\n"), 0o644)
	}
	os.MkdirAll(filepath.Join(ws, "secret-dir"), 0o755)
	os.WriteFile(filepath.Join(ws, "secret-dir", "s"), []byte("s"), 0o644)
	os.WriteFile(filepath.Join(ws, "gone.txt"), []byte("bye"), 0o644)
	// Unconfined, the attacks work.
	scratch := t.TempDir()
	attack := `set -e
echo '[core] hooksPath=/tmp' >> D/.git/config
echo evil > D/.git/hooks/pre-commit
echo evil > D/.envrc
mkdir -p D/.vscode && echo '{}' > D/.vscode/tasks.json
mkdir -p D/new && git init -q D/new`
	for _, d := range []string{".", "a/b/c"} {
		os.MkdirAll(filepath.Join(scratch, d, ".git", "hooks"), 0o755)
		if out, err := exec.Command("sh", "-c", strings.ReplaceAll(attack, "D/", filepath.Join(scratch, d)+"/")).CombinedOutput(); err != nil {
			t.Fatalf("unconfined: %v %s", err, out)
		}
	}
	before := map[string]string{}
	for _, p := range []string{".git/config", "a/b/c/.git/config"} {
		b, _ := os.ReadFile(filepath.Join(ws, p))
		before[p] = string(b)
	}
	events := newEventLog()
	pol := testPolicy(t, ws, func(p *policy.Policy) { p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(ws, "secret-dir")) })
	sb := create(t, b, sandbox.Spec{Policy: pol, Audit: events})
	for _, d := range []string{".", "a/b/c"} {
		if st, out := sh(t, sb, strings.ReplaceAll(attack, "D/", d+"/")); st.Code != 0 {
			t.Fatalf("inside, the overlay takes the writes: %+v %q", st, out)
		}
	}
	if st, out := sh(t, sb, "echo work > result.txt && mkdir -p out/x && echo y > out/x/y && ln -s result.txt link && rm gone.txt && chmod 755 result.txt"); st.Code != 0 {
		t.Fatalf("ordinary work inside: %+v %q", st, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "result.txt")); err == nil {
		t.Fatal("a write reached the host before Sync: there is no overlay")
	}
	rep, err := sb.(sandbox.Syncer).Sync(context.Background())
	if err != nil {
		t.Fatalf("sync: %v (%+v)", err, rep)
	}
	if rep.Denied == 0 {
		t.Errorf("nothing refused: %+v", rep)
	}
	for p, want := range before {
		if b, _ := os.ReadFile(filepath.Join(ws, p)); string(b) != want {
			t.Errorf("%s changed on the host: %q", p, b)
		}
	}
	for _, d := range []string{".", "a/b/c"} {
		for _, p := range []string{".git/hooks/pre-commit", ".envrc", ".vscode/tasks.json", "new/.git/config"} {
			if _, err := os.Lstat(filepath.Join(ws, d, p)); err == nil {
				t.Errorf("%s/%s written back", d, p)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "result.txt")); err != nil || string(b) != "work\n" {
		t.Errorf("result.txt: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "result.txt")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("result.txt mode: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out/x/y")); string(b) != "y\n" {
		t.Errorf("out/x/y: %q", b)
	}
	if l, _ := os.Readlink(filepath.Join(ws, "link")); l != "result.txt" {
		t.Errorf("link: %q", l)
	}
	if _, err := os.Stat(filepath.Join(ws, "gone.txt")); err == nil {
		t.Error("gone.txt not removed")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "secret-dir", "s")); string(b) != "s" {
		t.Error("the denied directory (a mask inside) was synced")
	}
	if events.count(audit.TypeDenied) == 0 {
		t.Error("no denied events")
	}
}

func TestNoNetwork(t *testing.T) {
	b := testBackend(t)
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
			c.Write([]byte("HOSTLISTENER"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("unconfined connect failed: %v", err)
	}
	c.Close()
	sb := create(t, b, sandbox.Spec{Policy: testPolicy(t, workspace(t), nil)})
	script := fmt.Sprintf(`python3 - <<'EOF'
import socket
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("127.0.0.1", %d)); print("CONNECTED", s.recv(20))
except Exception as e:
    print("refused", e)
for dst in [("1.1.1.1", 53), ("8.8.8.8", 53)]:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.connect(dst); u.send(b"x"); print("SENT", dst)
    except Exception as e:
        print("no route", e)
print(open("/proc/net/dev").read())
EOF`, port)
	st, out := sh(t, sb, script)
	t.Logf("inside: %s", out)
	if st.Code != 0 || strings.Contains(out, "CONNECTED") || strings.Contains(out, "HOSTLISTENER") || strings.Contains(out, "SENT") {
		t.Fatalf("network reachable from inside: %+v %q", st, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && !strings.Contains(name, " ") && name != "lo" && !strings.Contains(l, "|") {
			t.Errorf("interface %q inside, want only lo", name)
		}
	}
}

func TestMemoryLimitEndsSandbox(t *testing.T) {
	b := testBackend(t)
	pol := testPolicy(t, workspace(t), func(p *policy.Policy) { p.Limits.Memory = 128 << 20 })
	id := newID(t)
	sb := create(t, b, sandbox.Spec{ID: id, Policy: pol})
	// Well under the limit works.
	if st, out := sh(t, sb, `python3 -c 'a = bytearray(16 << 20); print("ok")'`); st.Code != 0 || out != "ok" {
		t.Fatalf("16 MiB under a 128 MiB limit: %+v %q", st, out)
	}
	st, out := sh(t, sb, `python3 -c 'a = bytearray(1 << 30); a[::4096] = b"x" * len(a[::4096]); print("allocated 1 GiB")'`)
	t.Logf("over the limit: status %+v output %q", st, out)
	if st.Code == 0 || strings.Contains(out, "allocated") {
		t.Fatalf("allocated 1 GiB under a 128 MiB limit: %+v %q", st, out)
	}
	select {
	case <-sb.Done():
		if !st.OOM {
			t.Errorf("the sandbox ended without the status saying OOM: %+v", st)
		}
		if _, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"/bin/true"}}); !errors.Is(err, sandbox.ErrClosed) || !errors.Is(err, sandbox.ErrLimit) {
			t.Errorf("exec after the memory limit ended the sandbox: %v, want ErrClosed and ErrLimit", err)
		}
	case <-time.After(5 * time.Second):
		// gVisor refused the allocation itself (ENOMEM) and lives on.
		t.Logf("the sandbox survived: gVisor refused the allocation")
	}
	sb.Destroy(context.Background())
	if err := leaks(b, id); err != nil {
		t.Fatal(err)
	}
}

func TestBadSpecLeavesNothing(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	cases := map[string]func(*sandbox.Spec){
		"missing read_only path": func(sp *sandbox.Spec) {
			sp.Policy.Filesystem.ReadOnly = append(sp.Policy.Filesystem.ReadOnly, "/nonexistent/airlock-test")
		},
		"missing read_write path": func(sp *sandbox.Spec) {
			sp.Policy.Filesystem.ReadWrite = append(sp.Policy.Filesystem.ReadWrite, filepath.Join(ws, "missing"))
		},
		"relative file path": func(sp *sandbox.Spec) {
			sp.Files = []sandbox.File{{Path: "etc/x", Data: []byte("x")}}
		},
		"tmpfs missing in a host dir": func(sp *sandbox.Spec) {
			sp.Policy.Filesystem.Tmpfs = append(sp.Policy.Filesystem.Tmpfs, filepath.Join(ws, "cache"))
		},
		"file missing in a host dir": func(sp *sandbox.Spec) {
			sp.Files = []sandbox.File{{Path: "/etc/airlock-test-injected", Data: []byte("x")}}
		},
		"bad id":           func(sp *sandbox.Spec) { sp.ID = "../escape" },
		"negative uid":     func(sp *sandbox.Spec) { u := -5; sp.Policy.Process.UID = &u },
		"missing rootfs":   func(sp *sandbox.Spec) { sp.Image = "/nonexistent/rootfs" },
		"relative workdir": func(sp *sandbox.Spec) { sp.Policy.Filesystem.Workspace = "rel" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			pol := testPolicy(t, ws, nil)
			sp := sandbox.Spec{ID: newID(t), Policy: pol}
			id := sp.ID
			mutate(&sp)
			sb, err := b.Create(context.Background(), sp)
			if err == nil {
				sb.Destroy(context.Background())
				t.Fatal("Create succeeded")
			}
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if err := leaks(b, id); err != nil {
				t.Errorf("failed Create left %v", err)
			}
			ents, _ := os.ReadDir(ws)
			if len(ents) > 0 {
				t.Errorf("failed Create left %d entries in the workspace", len(ents))
			}
		})
	}
}

// TestSeccompProfile: the agent (pid 1) cannot be signalled, nested
// namespaces and io_uring are refused, and ordinary threads still work
// (a clone3 rule once broke pthread_create).
func TestSeccompProfile(t *testing.T) {
	b := testBackend(t)
	sb := create(t, b, sandbox.Spec{Policy: testPolicy(t, workspace(t), nil)})
	if st, out := sh(t, sb, "kill -9 1; kill -STOP 1; echo done"); !strings.Contains(out, "done") || st.Code != 0 {
		t.Fatalf("kill of pid 1: %+v %q", st, out)
	}
	if st, out := sh(t, sb, "echo alive"); out != "alive" {
		t.Fatalf("agent gone after kill -9 1: %+v %q", st, out)
	}
	if st, out := sh(t, sb, "cat /proc/1/environ 2>/dev/null | wc -c"); out != "0" {
		t.Errorf("agent environment readable: %+v %q", st, out)
	}
	script := `python3 - <<'EOF'
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
t = threading.Thread(target=lambda: print("thread ok")); t.start(); t.join()
for name, nr, args in [("unshare(CLONE_NEWUSER)", 272, (0x10000000,)), ("unshare(CLONE_NEWNS)", 272, (0x20000,)), ("io_uring_setup", 425, (8, ctypes.create_string_buffer(120)))]:
    r = libc.syscall(nr, *args)
    print(name, "ALLOWED" if r >= 0 else "denied " + os.strerror(ctypes.get_errno()))
EOF`
	st, out := sh(t, sb, script)
	t.Logf("inside: %s", out)
	if st.Code != 0 || !strings.Contains(out, "thread ok") || strings.Contains(out, "ALLOWED") {
		t.Fatalf("status %+v output %q", st, out)
	}
	// clone3 with namespace flags (runsc since 2023 implements clone3, and
	// a filter cannot read its flags): it works unconfined, as root here;
	// inside it is ENOSYS (the agent's own filter), so libc uses clone.
	clone3 := `python3 - <<'EOF'
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
args = ctypes.create_string_buffer(struct.pack("=11Q", 0x10000000 | 0x20000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0), 88)
r = libc.syscall(435, args, 88)
if r == 0:
    os._exit(0)
if r > 0:
    os.waitpid(r, 0)
print("clone3(CLONE_NEWUSER|CLONE_NEWNS)", "ALLOWED" if r > 0 else "denied " + os.strerror(ctypes.get_errno()))
EOF`
	// Nor a signal to the agent through a pidfd, pidfd_open's or an open
	// /proc/1 (the escape suite's crash-agent-pidfd sends SIGSEGV so).
	pidfd := `python3 - <<'EOF'
import os, signal
for target in ("pidfd_open(1)", "open(/proc/1)"):
    try:
        fd = os.pidfd_open(1) if target == "pidfd_open(1)" else os.open("/proc/1", os.O_RDONLY | os.O_DIRECTORY)
        signal.pidfd_send_signal(fd, signal.SIGCONT)
        print(target, "SENT")
    except OSError as e:
        print(target, "refused:", e.strerror)
EOF`
	if st, out := sh(t, sb, pidfd); out != "pidfd_open(1) refused: Operation not permitted\nopen(/proc/1) refused: Operation not permitted" {
		t.Errorf("pidfd signals to the agent: %+v %q", st, out)
	}
	host, err := exec.Command("sh", "-c", clone3).CombinedOutput()
	if err != nil || !strings.Contains(string(host), "ALLOWED") {
		t.Fatalf("unconfined, clone3 with namespace flags does not work, so this proves nothing: %v %s", err, host)
	}
	if st, out := sh(t, sb, clone3); out != "clone3(CLONE_NEWUSER|CLONE_NEWNS) denied Function not implemented" {
		t.Errorf("inside: %+v %q", st, out)
	}
}
