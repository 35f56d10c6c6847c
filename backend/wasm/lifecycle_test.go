package wasm

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// privateDirs lists the private directories of sandbox id under base.
func privateDirs(t *testing.T, base, id string) []string {
	t.Helper()
	entries, _ := os.ReadDir(base)
	var out []string
	for _, e := range entries {
		if got, _, ok := parseTempName(e.Name()); ok && got == id {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestCreateBadInputLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	b := New(Config{TempDir: tmp, CacheDir: "off"})
	defer b.Close(context.Background())
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec sandbox.Spec
	}{
		{"nil policy", sandbox.Spec{ID: "x1"}},
		{"bad id", sandbox.Spec{ID: "../x", Policy: testPolicy(t.TempDir())}},
		{"missing workspace", sandbox.Spec{ID: "x2", Policy: testPolicy(filepath.Join(tmp, "nope"))}},
		{"relative workspace", sandbox.Spec{ID: "x3", Policy: testPolicy("rel/ws")}},
		{"bad injected file", sandbox.Spec{ID: "x4", Policy: testPolicy(t.TempDir()), Files: []sandbox.File{{Path: "relative"}}}},
	} {
		if _, err := b.Create(ctx, tc.spec); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
		if left := privateDirs(t, tmp, tc.spec.ID); len(left) > 0 {
			t.Errorf("%s: left %v behind", tc.name, left)
		}
	}
	// The failed IDs are free again.
	sb, err := b.Create(ctx, sandbox.Spec{ID: "x2", Policy: testPolicy(t.TempDir())})
	if err != nil {
		t.Fatalf("reuse of a failed id: %v", err)
	}
	if _, err := b.Create(ctx, sandbox.Spec{ID: "x2", Policy: testPolicy(t.TempDir())}); !errors.Is(err, sandbox.ErrExists) {
		t.Errorf("duplicate live id: %v, want ErrExists", err)
	}
	sb.Destroy(ctx)
}

func TestDestroyStopsAndRemoves(t *testing.T) {
	tmp := t.TempDir()
	g := guestModule(t)
	b := New(Config{TempDir: tmp, Commands: map[string]string{"guest": g}})
	defer b.Close(context.Background())
	ctx := context.Background()
	sb, err := b.Create(ctx, sandbox.Spec{ID: "d1", Policy: testPolicy(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	if len(privateDirs(t, tmp, "d1")) == 0 {
		t.Fatal("no private directories made (test is broken)")
	}
	var procs []sandbox.Process
	for _, mode := range []string{"loop", "sleep", "stdin"} {
		pr, pw := io.Pipe()
		defer pw.Close()
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"guest", mode}, Stdin: pr, Timeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	for _, p := range procs {
		st, err := p.Wait(ctx)
		if err != nil || st.Code != killedCode || st.TimedOut {
			t.Errorf("process after destroy: %+v %v", st, err)
		}
	}
	select {
	case <-sb.Done():
	default:
		t.Error("Done not closed")
	}
	if left := privateDirs(t, tmp, "d1"); len(left) > 0 {
		t.Errorf("left %v behind", left)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"guest", "hello"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("exec after destroy: %v", err)
	}
	if _, err := sb.Files().Stat(ctx, "/tmp"); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("files after destroy: %v", err)
	}
	if _, err := sb.Stats(ctx); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("stats after destroy: %v", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Errorf("second destroy: %v", err)
	}
}

func TestCleanup(t *testing.T) {
	tmp := t.TempDir()
	b := New(Config{TempDir: tmp, CacheDir: "off"})
	defer b.Close(context.Background())
	ctx := context.Background()
	live, err := b.Create(ctx, sandbox.Spec{ID: "live", Policy: testPolicy(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Destroy(ctx)
	// A crashed process's leftovers: a PID that cannot be alive.
	dead := filepath.Join(tmp, tempPrefix+"crashed.999999999.123")
	os.MkdirAll(filepath.Join(dead, "sub"), 0o755)
	// Another live process's directory (ours is alive: use init's PID).
	other := filepath.Join(tmp, tempPrefix+"other.1.456")
	os.Mkdir(other, 0o755)
	unrelated := filepath.Join(tmp, "unrelated")
	os.Mkdir(unrelated, 0o755)
	for range 2 { // idempotent
		if err := b.Cleanup(ctx, map[string]bool{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("crashed sandbox's directory not removed: %v", err)
	}
	for _, keep := range []string{other, unrelated} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s removed: %v", keep, err)
		}
	}
	if len(privateDirs(t, tmp, "live")) == 0 {
		t.Error("Cleanup removed a live sandbox's directories")
	}
	if _, pid, ok := parseTempName(tempPrefix + "a.b." + strconv.Itoa(os.Getpid()) + ".7"); !ok || pid != os.Getpid() {
		t.Errorf("parseTempName of an id with dots: %d %v", pid, ok)
	}
}

func TestFilesAPI(t *testing.T) {
	ws := t.TempDir()
	ro := t.TempDir()
	os.WriteFile(filepath.Join(ro, "r"), []byte("ro"), 0o644)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link-out"))
	p := testPolicy(ws)
	p.Filesystem.ReadOnly = []string{ro}
	sb := newSandbox(t, p)
	f := sb.Files()
	ctx := context.Background()

	if err := f.WriteFile(ctx, ws+"/a/b/c.txt", strings.NewReader("hello"), 0o600, true); err != nil {
		t.Fatal(err)
	}
	rc, err := f.ReadFile(ctx, ws+"/a/b/c.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "hello" {
		t.Fatalf("read back %q", data)
	}
	// The guest sees what the Files API wrote, and the other way round.
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "cat", ws + "/a/b/c.txt"}})
	if r.stdout != "hello" {
		t.Fatalf("guest read %q", r.stdout)
	}
	run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "write", "/tmp/g", "from guest"}})
	if rc, err := f.ReadFile(ctx, "/tmp/g"); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "from guest" {
			t.Fatalf("private /tmp via Files: %q", b)
		}
	}
	st, err := f.Stat(ctx, ws+"/a/b/c.txt")
	if err != nil || st.Size != 5 || st.Mode.Perm() != 0o600 || st.IsDir {
		t.Fatalf("stat %+v %v", st, err)
	}
	if err := f.Mkdir(ctx, ws+"/d", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename(ctx, ws+"/a/b/c.txt", ws+"/d/c.txt"); err != nil {
		t.Fatal(err)
	}
	list, err := f.List(ctx, ws+"/d")
	if err != nil || len(list) != 1 || list[0].Name != "c.txt" || list[0].Path != ws+"/d/c.txt" {
		t.Fatalf("list %+v %v", list, err)
	}
	if st, err := f.Stat(ctx, ws+"/link-out"); err != nil || st.Link != filepath.Join(outside, "secret") {
		t.Errorf("stat of a symlink: %+v %v", st, err)
	}
	if err := f.Remove(ctx, ws+"/a", true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		kind error
	}{
		{"read missing", first(f.ReadFile(ctx, ws+"/nope")), sandbox.ErrNotFound},
		{"read outside", first(f.ReadFile(ctx, filepath.Join(outside, "secret"))), sandbox.ErrNotFound},
		{"read through symlink out", first(f.ReadFile(ctx, ws+"/link-out")), sandbox.ErrPermission},
		{"read dotdot", first(f.ReadFile(ctx, ws+"/../"+filepath.Base(outside)+"/secret")), sandbox.ErrNotFound},
		{"relative", first(f.ReadFile(ctx, "rel")), sandbox.ErrInvalid},
		{"write read-only", f.WriteFile(ctx, ro+"/r", strings.NewReader("x"), 0o644, false), sandbox.ErrPermission},
		{"write outside", f.WriteFile(ctx, outside+"/new", strings.NewReader("x"), 0o644, false), sandbox.ErrNotFound},
		{"write through symlink out", f.WriteFile(ctx, ws+"/link-out", strings.NewReader("x"), 0o644, false), sandbox.ErrPermission},
		{"write protected", f.WriteFile(ctx, ws+"/.git/hooks/pre-commit", strings.NewReader("x"), 0o755, true), sandbox.ErrPermission},
		{"remove mount", f.Remove(ctx, ws, true), sandbox.ErrPermission},
		{"rename across mounts", f.Rename(ctx, ws+"/d/c.txt", "/tmp/c.txt"), sandbox.ErrInvalid},
		{"mkdir exists", f.Mkdir(ctx, ws+"/d", 0o755, false), sandbox.ErrExists},
	} {
		if !errors.Is(tc.err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.kind)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s" {
		t.Fatalf("host file outside changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/hooks")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("protected directory created: %v", err)
	}
}

func first[T any](_ T, err error) error { return err }

// TestProtectConfig attacks the workspace's protected files from inside,
// after showing the same writes work where protect_config is off.
func TestProtectConfig(t *testing.T) {
	attacks := [][]string{
		{"guest", "write", ".git/hooks/pre-commit", "evil"},
		{"guest", "write", ".bashrc", "evil"},
		{"guest", "write", ".vscode/settings.json", "evil"},
	}
	setup := func(ws string) {
		os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
		os.MkdirAll(filepath.Join(ws, ".vscode"), 0o755)
	}
	off := false
	wsOpen := t.TempDir()
	setup(wsOpen)
	pOpen := testPolicy(wsOpen)
	pOpen.Filesystem.ProtectConfig = &off
	sbOpen := newSandbox(t, pOpen)
	for _, a := range attacks {
		if r := run(t, sbOpen, sandbox.ExecRequest{Args: a}); r.status.Code != 0 {
			t.Fatalf("%v fails even unprotected (test is broken): %q", a, r.stderr)
		}
	}
	ws := t.TempDir()
	setup(ws)
	sb := newSandbox(t, testPolicy(ws))
	for _, a := range attacks {
		if r := run(t, sb, sandbox.ExecRequest{Args: a}); r.status.Code == 0 {
			t.Errorf("%v succeeded with protect_config on", a)
		}
	}
	for _, f := range []string{".git/hooks/pre-commit", ".bashrc", ".vscode/settings.json"} {
		if _, err := os.Stat(filepath.Join(ws, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created", f)
		}
	}
}

func TestDiskQuotaAndOpenFiles(t *testing.T) {
	p := testPolicy(t.TempDir())
	p.Limits.DiskBytes = 1 << 20
	p.Limits.OpenFiles = 8
	sb := newSandbox(t, p)
	big := strings.Repeat("x", 2<<20)
	r := run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "write", "/tmp/big", big[:512<<10]}})
	if r.status.Code != 0 {
		t.Fatalf("write under the disk limit: %+v %q", r.status, r.stderr)
	}
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "write", "/tmp/big2", big[:768<<10]}})
	if r.status.Code == 0 {
		t.Fatalf("write past the disk limit of /tmp succeeded")
	}
	// Rewriting (truncating) a file gives its space back.
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "write", "/tmp/big", "small"}})
	if r.status.Code != 0 {
		t.Fatalf("rewrite: %q", r.stderr)
	}
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "write", "/tmp/big3", big[:768<<10]}})
	if r.status.Code != 0 {
		t.Fatalf("write after space was freed: %q", r.stderr)
	}
	// Open files: the limit of 8 (preopens included) stops the ninth.
	r = run(t, sb, sandbox.ExecRequest{Args: []string{"guest", "openmany", "/tmp/big", "64"}})
	if r.status.Code == 0 || !strings.Contains(r.stdout, "opened") {
		t.Fatalf("open-file limit not applied: %+v %q %q", r.status, r.stdout, r.stderr)
	}
	n, _ := strconv.Atoi(strings.Fields(r.stdout)[1])
	if n >= 8 || n == 0 {
		t.Fatalf("opened %d files under a limit of 8", n)
	}
}
