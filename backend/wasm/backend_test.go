package wasm

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestHelloArgsEnv(t *testing.T) {
	ws := t.TempDir()
	p := testPolicy(ws)
	p.Process.Env = map[string]string{"FROM_POLICY": "p"}
	sb := newSandbox(t, p)
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "hello", "a b", "c"}})
	if r.status != (sandbox.ExitStatus{}) || r.stdout != "hello a b c\n" {
		t.Fatalf("got %+v %q %q", r.status, r.stdout, r.stderr)
	}
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "env"}, Env: map[string]string{"FROM_REQ": "r"}})
	for _, want := range []string{"FROM_POLICY=p", "FROM_REQ=r", "PWD=" + ws} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("env lacks %s:\n%s", want, r.stdout)
		}
	}
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "pwd"}})
	if r.stdout != ws+" <nil>\n" {
		t.Errorf("pwd = %q, want %q", r.stdout, ws)
	}
}

func TestHostEnvironmentFiltered(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_PLAIN", "visible")
	t.Setenv("AIRLOCK_TEST_TOKEN", "secret")
	t.Setenv("AIRLOCK_TEST_OTHER", "hidden")
	p := testPolicy(t.TempDir())
	p.Process.EnvAllow = []string{"AIRLOCK_TEST_PLAIN", "AIRLOCK_TEST_TOKEN"}
	sb := newSandbox(t, p)
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "env"}})
	if !strings.Contains(r.stdout, "AIRLOCK_TEST_PLAIN=visible\n") {
		t.Errorf("allowed variable missing:\n%s", r.stdout)
	}
	for _, bad := range []string{"AIRLOCK_TEST_TOKEN", "AIRLOCK_TEST_OTHER"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("%s leaked into the sandbox:\n%s", bad, r.stdout)
		}
	}
}

func TestExitCodes(t *testing.T) {
	sb := newSandbox(t, testPolicy(t.TempDir()))
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"guest", "exit", "0"}, 0},
		{[]string{"guest", "exit", "3"}, 3},
		{[]string{"guest", "exit", "255"}, 255},
		{[]string{"guest", "nosuchmode"}, 64},
		{[]string{"guest", "trap"}, 1},
	} {
		r := run(t, sb, sandbox.ExecRequest{Args: tc.args})
		if r.status.Code != tc.code || r.status.TimedOut || r.status.OOM {
			t.Errorf("%v: status %+v, want code %d (stderr %q)", tc.args, r.status, tc.code, r.stderr)
		}
	}
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "trap"}})
	if !strings.Contains(r.stderr, "wasm trap") {
		t.Errorf("trap not reported on stderr: %q", r.stderr)
	}
}

func TestWorkspaceReadWrite(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("from host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, testPolicy(ws))
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "cat", filepath.Join(ws, "in.txt")}})
	if r.stdout != "from host\n" || r.status.Code != 0 {
		t.Fatalf("cat: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	// Relative to the working directory (the workspace).
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "write", "out.txt", "from guest"}})
	if r.status.Code != 0 {
		t.Fatalf("write: %+v %q", r.status, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	if err != nil || string(b) != "from guest" {
		t.Fatalf("host sees %q, %v", b, err)
	}
	// /tmp is private and writable.
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "write", "/tmp/x", "y"}})
	if r.status.Code != 0 {
		t.Fatalf("write /tmp: %+v %q", r.status, r.stderr)
	}
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "ls", ws}})
	if r.status.Code != 0 || r.stdout != "in.txt\nout.txt\n" {
		t.Fatalf("ls: %+v %q %q", r.status, r.stdout, r.stderr)
	}
}

func TestReadOnlyPath(t *testing.T) {
	ro := t.TempDir()
	os.WriteFile(filepath.Join(ro, "f"), []byte("ro"), 0o644)
	p := testPolicy(t.TempDir())
	p.Filesystem.ReadOnly = []string{ro}
	sb := newSandbox(t, p)
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "cat", filepath.Join(ro, "f")}})
	if r.stdout != "ro" {
		t.Fatalf("read: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "write", filepath.Join(ro, "f"), "changed"}})
	if r.status.Code != 3 {
		t.Fatalf("write to read-only path: %+v %q", r.status, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "f")); string(b) != "ro" {
		t.Fatalf("read-only file changed: %q", b)
	}
}

// TestReadOutsidePreopens: paths the policy does not grant do not exist for
// the guest, by absolute path, by ".." from a preopen, and through a
// symbolic link. The same attacks first succeed on wazero's own directory
// mount, which is why the backend opens everything through os.Root.
func TestReadOutsidePreopens(t *testing.T) {
	parent := t.TempDir()
	secret := filepath.Join(parent, "secret.txt")
	os.WriteFile(secret, []byte("TOP SECRET\n"), 0o644)
	ws := filepath.Join(parent, "ws")
	os.Mkdir(ws, 0o755)
	os.Symlink("../secret.txt", filepath.Join(ws, "rel-link"))
	os.Symlink(secret, filepath.Join(ws, "abs-link"))

	// wazero cleans ".." lexically itself, but follows symbolic links out.
	for _, args := range [][]string{
		{"cat", filepath.Join(ws, "rel-link")},
		{"cat", filepath.Join(ws, "abs-link")},
		{"rawopen", "rel-link"},
	} {
		if out := runUnconfined(t, ws, args...); !strings.Contains(out, "TOP SECRET") {
			t.Fatalf("%v does not escape unconfined (test is broken): %q", args, out)
		}
	}

	sb := newSandbox(t, testPolicy(ws))
	for _, args := range [][]string{
		{"guest", "cat", secret},
		{"guest", "cat", "/etc/passwd"},
		{"guest", "cat", filepath.Join(ws, "rel-link")},
		{"guest", "cat", filepath.Join(ws, "abs-link")},
		{"guest", "rawopen", "../secret.txt"},
		{"guest", "rawopen", "../../../../../../etc/passwd"},
		{"guest", "rawopen", "rel-link"},
		{"guest", "ls", parent},
	} {
		r := run(t, sb, sandbox.ExecRequest{Args: args})
		if strings.Contains(r.stdout, "secret") || strings.Contains(r.stdout, "SECRET") || strings.Contains(r.stdout, "root:") {
			t.Errorf("%v escaped: %+v %q", args, r.status, r.stdout)
		}
	}
}

func TestDenyInsideWorkspace(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "private"), 0o755)
	os.WriteFile(filepath.Join(ws, "private", "key"), []byte("k"), 0o644)
	os.WriteFile(filepath.Join(ws, "ok"), []byte("fine"), 0o644)
	p := testPolicy(ws)
	p.Filesystem.Deny = []string{filepath.Join(ws, "private")}
	sb := newSandbox(t, p)
	if r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "cat", filepath.Join(ws, "ok")}}); r.stdout != "fine" {
		t.Fatalf("allowed file: %+v %q", r.status, r.stderr)
	}
	for _, args := range [][]string{
		{"guest", "cat", filepath.Join(ws, "private", "key")},
		{"guest", "rawopen", "private/key"},
		{"guest", "rawopen", "private/../private/key"},
	} {
		if r := run(t, sb, sandbox.ExecRequest{Args: args}); r.status.Code == 0 {
			t.Errorf("%v read a denied file: %q", args, r.stdout)
		}
	}
	_, err := sb.Files().ReadFile(context.Background(), filepath.Join(ws, "private", "key"))
	if !errors.Is(err, sandbox.ErrPermission) {
		t.Errorf("Files read of denied file: %v", err)
	}
}

func TestTimeoutStopsLoop(t *testing.T) {
	sb := newSandbox(t, testPolicy(t.TempDir()))
	for _, mode := range []string{"loop", "sleep", "stdin"} {
		req := sandbox.ExecRequest{Args: []string{"guest", mode}, Timeout: 500 * time.Millisecond}
		if mode == "stdin" {
			pr, pw := io.Pipe()
			defer pw.Close()
			req.Stdin = pr
		}
		r := run(t, sb, req)
		if !r.status.TimedOut || r.status.Code != killedCode {
			t.Errorf("%s: %+v, want timed out", mode, r.status)
		}
	}
}

func TestMemoryLimitStopsGrowth(t *testing.T) {
	p := testPolicy(t.TempDir())
	p.Limits.Memory = 64 << 20
	sb := newSandbox(t, p)
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "grow"}})
	if !r.status.OOM || r.status.Code != killedCode {
		t.Fatalf("status %+v, want OOM (stderr %q)", r.status, r.stderr)
	}
	if !strings.Contains(r.stderr, "memory limit of 64 MiB exceeded") {
		t.Errorf("no clear error on stderr: %q", r.stderr)
	}
	st, err := sb.Stats(context.Background())
	if err != nil || st.MemoryPeakBytes > 64<<20 || st.MemoryPeakBytes < 32<<20 {
		t.Errorf("stats %+v %v: peak should be near the limit, never above", st, err)
	}
	// The limit is the sandbox's: two modules share it.
	p3 := testPolicy(t.TempDir())
	p3.Limits.Memory = 96 << 20
	sb3 := newSandbox(t, p3)
	var held syncBuffer
	holder, err := sb3.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"guest", "hold", "48"}, Stdout: &held, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(held.String(), "held"); i++ {
		if i > 6000 {
			t.Fatal("holder never allocated its memory")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r = run(t, sb3, sandbox.ExecRequest{Args: []string{"guest", "hold", "48"}, Timeout: time.Minute})
	if !r.status.OOM {
		t.Errorf("second module within its own limit but over the sandbox's: %+v", r.status)
	}
	sb3.Destroy(context.Background())
	holder.Wait(context.Background())
	// A module needing more than the limit at start does not start.
	p2 := testPolicy(t.TempDir())
	p2.Limits.Memory = 64 << 10
	sb2 := newSandbox(t, p2)
	if _, err := sb2.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"guest", "hello"}}); !errors.Is(err, sandbox.ErrLimit) {
		t.Errorf("exec under a tiny limit: %v, want ErrLimit", err)
	}
}

func TestOutputLimit(t *testing.T) {
	p := testPolicy(t.TempDir())
	p.Limits.OutputBytes = 10000
	sb := newSandbox(t, p)
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "flood", "1000000"}})
	if !r.status.Truncated || len(r.stdout) != 10000 || r.status.Code != 0 {
		t.Fatalf("status %+v, %d bytes out, want 10000 and truncated", r.status, len(r.stdout))
	}
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "flood", "5000"}})
	if r.status.Truncated {
		t.Fatalf("small output marked truncated: %+v", r.status)
	}
}

func TestStdin(t *testing.T) {
	sb := newSandbox(t, testPolicy(t.TempDir()))
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "stdin"}, Stdin: strings.NewReader("piped\n")})
	if r.stdout != "piped\n" {
		t.Fatalf("stdin echo %q", r.stdout)
	}
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "stdin"}})
	if r.stdout != "" || r.status.Code != 0 {
		t.Fatalf("nil stdin: %+v %q", r.status, r.stdout)
	}
	// CloseStdin ends a streaming input.
	pr, pw := io.Pipe()
	p, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"guest", "stdin"}, Stdin: pr})
	if err != nil {
		t.Fatal(err)
	}
	pw.Write([]byte("x"))
	p.CloseStdin()
	if st, err := p.Wait(context.Background()); err != nil || st.Code != 0 {
		t.Fatalf("wait after CloseStdin: %+v %v", st, err)
	}
}

func TestNotSupported(t *testing.T) {
	sb := newSandbox(t, testPolicy(t.TempDir()))
	if _, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"guest", "hello"}, TTY: true}); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("TTY: %v", err)
	}
	p, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"guest", "sleep"}, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(context.Background(), sandbox.SIGTERM); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("signal: %v", err)
	}
	if err := p.Resize(context.Background(), 10, 10); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("resize: %v", err)
	}
	p.Wait(context.Background())
}

func TestExecLookup(t *testing.T) {
	ws := t.TempDir()
	data, err := os.ReadFile(guestModule(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "prog.wasm"), data, 0o644)
	os.WriteFile(filepath.Join(ws, "text.wasm"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	sb := newSandbox(t, testPolicy(ws))
	// By path inside the sandbox, absolute and relative to the workdir.
	for _, name := range []string{filepath.Join(ws, "prog.wasm"), "./prog.wasm"} {
		r := run(t, sb, sandbox.ExecRequest{Args: []string{name, "hello", "path"}})
		if r.stdout != "hello path\n" {
			t.Errorf("%s: %+v %q %q", name, r.status, r.stdout, r.stderr)
		}
	}
	for _, tc := range []struct {
		name string
		kind error
	}{
		{"nosuch", sandbox.ErrNotFound},
		{"./nosuch.wasm", sandbox.ErrNotFound},
		{"/nowhere/x.wasm", sandbox.ErrNotFound},
		{"./text.wasm", sandbox.ErrPermission},
		{ws, sandbox.ErrPermission},
	} {
		if _, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{tc.name}}); !errors.Is(err, tc.kind) {
			t.Errorf("exec %s: %v, want %v", tc.name, err, tc.kind)
		}
	}
	if _, err := sb.Exec(context.Background(), sandbox.ExecRequest{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("empty args: %v", err)
	}
}

func TestModuleCompiledOnce(t *testing.T) {
	// A cache directory of its own: other test packages share the default.
	cacheDir := t.TempDir()
	cmds := map[string]string{"guest": guestModule(t)}
	b := New(Config{CacheDir: cacheDir, Commands: cmds})
	defer b.Close(context.Background())
	sb, err := b.Create(context.Background(), sandbox.Spec{ID: "cache-first", Policy: testPolicy(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "hello"}})
	if n := b.compiled.Load(); n != 1 {
		t.Fatalf("%d compilations for one module", n)
	}
	for range 3 {
		run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "hello"}})
	}
	if n := b.compiled.Load(); n != 1 {
		t.Fatalf("module compiled again: %d compilations, want 1", n)
	}
	// The disk cache holds the compiled code for the next process.
	count := func() int {
		n := 0
		filepath.WalkDir(cacheDir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	entries := count()
	if entries == 0 {
		t.Fatalf("disk compilation cache %q is empty", cacheDir)
	}
	// A second backend (a new process) on the same cache dir loads it.
	b2 := New(Config{CacheDir: cacheDir, Commands: cmds})
	defer b2.Close(context.Background())
	sb2, err := b2.Create(context.Background(), sandbox.Spec{ID: "cache-reuse", Policy: testPolicy(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Destroy(context.Background())
	if r := run(t, sb2, sandbox.ExecRequest{Args: []string{"guest", "hello"}}); r.stdout != "hello \n" {
		t.Fatalf("second backend: %+v %q", r.status, r.stdout)
	}
	if after := count(); after != entries {
		t.Fatalf("second backend wrote %d new cache entries: it compiled again", after-entries)
	}
}
