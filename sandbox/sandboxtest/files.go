package sandboxtest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

func (s *suite) runFilesChecks(t *testing.T) {
	e := s.newFilesEnv(t)
	s.check(t, "files/round-trip", e.roundTrip)
	s.check(t, "files/mode", e.mode)
	s.check(t, "files/not-found", e.notFound)
	s.check(t, "files/invalid-path", e.invalidPath)
	s.check(t, "files/traversal", e.traversal)
	s.check(t, "files/symlink-out", e.symlinkOut)
	s.check(t, "files/ops", e.ops)
	s.check(t, "files/workspace-mount", s.testWorkspaceMount)
}

// filesEnv is what the files checks share: the shared sandbox, its Files,
// a directory of their own in its workspace, and a host secret (and the
// host directory holding it) outside everything the policy grants.
type filesEnv struct {
	s                        *suite
	bx                       *box
	f                        sandbox.Files
	base                     string
	secretDir, secret, token string
}

func (s *suite) newFilesEnv(t *testing.T) *filesEnv {
	bx := s.shared(t)
	e := &filesEnv{s: s, bx: bx, f: bx.Files(), base: filepath.Join(bx.ws, "sbt-files-"+randHex(4))}
	if err := e.f.Mkdir(ctxT(t), e.base, 0o755, true); err != nil {
		t.Fatalf("mkdir %s: %v", e.base, err)
	}
	e.secretDir = t.TempDir()
	e.secret = filepath.Join(e.secretDir, "secret")
	e.token = "sbt-secret-" + randHex(8)
	if err := os.WriteFile(e.secret, []byte(e.token), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *filesEnv) read(t *testing.T, path string) ([]byte, error) {
	rc, err := e.f.ReadFile(ctxT(t), path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func (e *filesEnv) write(t *testing.T, path string, data []byte, mode fs.FileMode) {
	t.Helper()
	if err := e.f.WriteFile(ctxT(t), path, bytes.NewReader(data), mode, false); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

func (e *filesEnv) roundTrip(t *testing.T) {
	bin := make([]byte, 3<<20+17)
	rand.Read(bin)
	for name, data := range map[string][]byte{"text.txt": []byte("hello files\n"), "binary.bin": bin, "empty": {}} {
		p := filepath.Join(e.base, name)
		e.write(t, p, data, 0o644)
		got, err := e.read(t, p)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: read back %d bytes (err %v), want %d equal bytes", name, len(got), err, len(data))
		}
	}
	// Overwrite truncates.
	p := filepath.Join(e.base, "text.txt")
	e.write(t, p, []byte("x"), 0o644)
	if got, _ := e.read(t, p); string(got) != "x" {
		t.Errorf("overwrite: %q, want truncation to \"x\"", got)
	}
	// Written through Files, seen by processes (and the reverse).
	if r := e.bx.run(t, nil, "readfile", p); r.stdout != "x" {
		t.Errorf("process reads %q written through Files: %+v", p, r)
	}
	q := filepath.Join(e.base, "from-process")
	if r := e.bx.run(t, nil, "writefile", q, "made inside"); r.status.Code != 0 {
		t.Fatalf("process write: %+v", r)
	}
	if got, err := e.read(t, q); string(got) != "made inside" {
		t.Errorf("Files reads a process's file: %q %v", got, err)
	}
	// mkdirs creates parents.
	deep := filepath.Join(e.base, "a", "b", "c.txt")
	if err := e.f.WriteFile(ctxT(t), deep, strings.NewReader("deep"), 0o644, true); err != nil {
		t.Fatalf("write with mkdirs: %v", err)
	}
}

func (e *filesEnv) mode(t *testing.T) {
	for _, mode := range []fs.FileMode{0o600, 0o640, 0o755} {
		p := filepath.Join(e.base, "mode-"+mode.String())
		e.write(t, p, []byte("m"), mode)
		fi, err := e.f.Stat(ctxT(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode.Perm() != mode || fi.IsDir || fi.Size != 1 || fi.Name != filepath.Base(p) {
			t.Errorf("stat %s: %+v, want mode %v size 1", p, fi, mode)
		}
	}
	// An executable written through Files runs.
	exe := filepath.Join(e.base, "copied-helper")
	if e.s.opts.HelperGOOS == "wasip1" {
		exe += ".wasm"
	}
	hb, err := os.ReadFile(e.s.bin)
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, exe, hb, 0o755)
	var out bytes.Buffer
	if st := e.bx.exec(t, sandbox.ExecRequest{Args: []string{exe, "echo-split", "ran", ""}, Stdout: &out}); st.Code != 0 || out.String() != "ran" {
		t.Errorf("run a file written with mode 0755: %+v %q", st, out.String())
	}
}

func (e *filesEnv) notFound(t *testing.T) {
	ctx := ctxT(t)
	missing := filepath.Join(e.base, "missing")
	if _, err := e.f.ReadFile(ctx, missing); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("ReadFile missing: %v", err)
	}
	if _, err := e.f.Stat(ctx, missing); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Stat missing: %v", err)
	}
	if _, err := e.f.List(ctx, missing); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("List missing: %v", err)
	}
	if err := e.f.Remove(ctx, missing, false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Remove missing: %v", err)
	}
	if err := e.f.Rename(ctx, missing, missing+"2"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Rename missing: %v", err)
	}
	if err := e.f.WriteFile(ctx, filepath.Join(missing, "x"), strings.NewReader("x"), 0o644, false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("WriteFile in a missing dir without mkdirs: %v", err)
	}
}

func (e *filesEnv) invalidPath(t *testing.T) {
	ctx := ctxT(t)
	for _, p := range []string{"relative/path", "", e.base + "/nul\x00byte"} {
		if _, err := e.f.Stat(ctx, p); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Stat(%q): %v, want ErrInvalid", p, err)
		}
		if err := e.f.WriteFile(ctx, p, strings.NewReader("x"), 0o644, true); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("WriteFile(%q): %v, want ErrInvalid", p, err)
		}
	}
}

func (e *filesEnv) traversal(t *testing.T) {
	ctx := ctxT(t)
	up := e.bx.ws + strings.Repeat("/..", strings.Count(e.bx.ws, "/")+2) + e.secret
	if got, err := e.read(t, up); err == nil || bytes.Contains(got, []byte(e.token)) {
		t.Errorf("ReadFile(%q) = %q, %v: the host secret must be unreachable", up, got, err)
	}
	target := e.bx.ws + strings.Repeat("/..", strings.Count(e.bx.ws, "/")+2) + filepath.Join(e.secretDir, "planted")
	e.f.WriteFile(ctx, target, strings.NewReader("x"), 0o644, true)
	if _, err := os.Stat(filepath.Join(e.secretDir, "planted")); err == nil {
		t.Errorf("WriteFile(%q) created a file on the host", target)
	}
}

func (e *filesEnv) symlinkOut(t *testing.T) {
	ctx := ctxT(t)
	hostBase := e.s.hostPath(e.bx, e.base)
	if hostBase == "" {
		t.Fatal("sandboxtest: the symlink check needs the workspace to be a host directory")
	}
	link := filepath.Join(e.base, "link-out")
	if err := os.Symlink(e.secret, filepath.Join(hostBase, "link-out")); err != nil {
		t.Fatal(err)
	}
	if got, err := e.read(t, link); err == nil || bytes.Contains(got, []byte(e.token)) {
		t.Errorf("ReadFile through a symlink to the host secret = %q, %v", got, err)
	}
	dirLink := filepath.Join(e.base, "dirlink-out")
	if err := os.Symlink(e.secretDir, filepath.Join(hostBase, "dirlink-out")); err != nil {
		t.Fatal(err)
	}
	e.f.WriteFile(ctx, filepath.Join(dirLink, "planted-via-link"), strings.NewReader("x"), 0o644, false)
	e.f.Mkdir(ctx, filepath.Join(dirLink, "dir-via-link"), 0o755, false)
	e.f.Rename(ctx, filepath.Join(e.base, "text.txt"), filepath.Join(dirLink, "moved-via-link"))
	for _, n := range []string{"planted-via-link", "dir-via-link", "moved-via-link"} {
		if _, err := os.Lstat(filepath.Join(e.secretDir, n)); err == nil {
			t.Errorf("%s reached the host through a symlinked directory", n)
		}
	}
	if _, err := e.f.List(ctx, dirLink); err == nil {
		ents, _ := e.f.List(ctx, dirLink)
		for _, e := range ents {
			if e.Name == "secret" {
				t.Errorf("List through a symlink shows the host directory")
			}
		}
	}
}

func (e *filesEnv) ops(t *testing.T) {
	ctx := ctxT(t)
	d := filepath.Join(e.base, "ops")
	if err := e.f.Mkdir(ctx, filepath.Join(d, "x", "y"), 0o750, true); err != nil {
		t.Fatalf("mkdir parents: %v", err)
	}
	if err := e.f.Mkdir(ctx, d, 0o750, false); !errors.Is(err, sandbox.ErrExists) {
		t.Errorf("mkdir existing: %v, want ErrExists", err)
	}
	if err := e.f.Mkdir(ctx, filepath.Join(d, "p", "q"), 0o750, false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("mkdir without parents under a missing dir: %v, want ErrNotFound", err)
	}
	if fi, err := e.f.Stat(ctx, filepath.Join(d, "x")); err != nil || !fi.IsDir {
		t.Errorf("stat dir: %+v %v", fi, err)
	}
	e.write(t, filepath.Join(d, "f1"), []byte("one"), 0o644)
	if hb := e.s.hostPath(e.bx, d); hb != "" {
		if err := os.Symlink("f1", filepath.Join(hb, "l1")); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := e.f.List(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
		if e.Name == "l1" && e.Link != "f1" {
			t.Errorf("List: symlink l1 has Link %q, want f1", e.Link)
		}
		if e.Name == "x" && !e.IsDir {
			t.Errorf("List: x not a dir: %+v", e)
		}
	}
	sort.Strings(names)
	if want := "f1,l1,x"; strings.Join(names, ",") != want && strings.Join(names, ",") != "f1,x" {
		t.Errorf("List = %v, want %s", names, want)
	}
	if err := e.f.Rename(ctx, filepath.Join(d, "f1"), filepath.Join(d, "x", "f2")); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if _, err := e.f.Stat(ctx, filepath.Join(d, "f1")); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("old name after rename: %v", err)
	}
	if got, err := e.read(t, filepath.Join(d, "x", "f2")); string(got) != "one" {
		t.Errorf("new name after rename: %q %v", got, err)
	}
	// As rename(2): a file never replaces a directory.
	if err := e.f.Rename(ctx, filepath.Join(d, "x", "f2"), filepath.Join(d, "x", "y")); err == nil {
		t.Errorf("rename of a file onto a directory succeeded")
	}
	if fi, err := e.f.Stat(ctx, filepath.Join(d, "x", "y")); err != nil || !fi.IsDir {
		t.Errorf("the directory after a refused rename onto it: %+v %v", fi, err)
	}
	if err := e.f.Remove(ctx, filepath.Join(d, "x"), false); err == nil {
		t.Errorf("non-recursive remove of a non-empty dir succeeded")
	}
	if err := e.f.Remove(ctx, filepath.Join(d, "x", "f2"), false); err != nil {
		t.Errorf("remove file: %v", err)
	}
	if err := e.f.Remove(ctx, d, true); err != nil {
		t.Fatalf("recursive remove: %v", err)
	}
	if _, err := e.f.Stat(ctx, d); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("stat after recursive remove: %v", err)
	}
}

// testWorkspaceMount checks a workspace shown at a stable path inside
// (workspace_mount, as every server sandbox has it): processes start
// there, see what the host has in it, and what they write (or the Files
// API writes) reaches the host directory.
func (s *suite) testWorkspaceMount(t *testing.T) {
	sp := s.spec(t)
	fsp := &sp.Policy.Filesystem
	host := fsp.WorkspacePath()
	if host == "" || s.opts.HelperDir != "" {
		t.Fatal("sandboxtest: files/workspace-mount needs a host workspace (declare it not applicable otherwise)")
	}
	pol := sp.Policy.Clone()
	pol.Filesystem.WorkspaceMount = "/sbt-workspace"
	if w := pol.Process.Workdir; w == "" || w == host || w == fsp.WorkspaceInside() {
		pol.Process.Workdir = "/sbt-workspace"
	}
	sp.Policy = pol
	if err := os.WriteFile(filepath.Join(host, "from-host"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	bx := s.create(t, sp)
	if bx.ws != "/sbt-workspace" {
		t.Fatalf("workspace inside: %q", bx.ws)
	}
	if r := bx.run(t, nil, "pwd"); r.stdout != "/sbt-workspace" {
		t.Errorf("working directory: %+v, want /sbt-workspace", r)
	}
	if r := bx.run(t, nil, "readfile", "/sbt-workspace/from-host"); r.stdout != "host" {
		t.Errorf("the host's file at the inside path: %+v", r)
	}
	if r := bx.run(t, nil, "writefile", "/sbt-workspace/from-proc", "proc"); r.status.Code != 0 {
		t.Fatalf("write in the workspace: %+v", r)
	}
	if err := bx.Files().WriteFile(ctxT(t), "/sbt-workspace/from-api", strings.NewReader("api"), 0o644, false); err != nil {
		t.Fatalf("Files write at the inside path: %v", err)
	}
	// Backends that bring writes back at the end (overlay write-back) do
	// it on Sync; the others have written in place already.
	if sy, ok := bx.Sandbox.(sandbox.Syncer); ok {
		if _, err := sy.Sync(ctxT(t)); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	for name, want := range map[string]string{"from-proc": "proc", "from-api": "api"} {
		if got, err := os.ReadFile(filepath.Join(host, name)); err != nil || string(got) != want {
			t.Errorf("host workspace %s: %q %v, want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat("/sbt-workspace"); err == nil {
		t.Errorf("/sbt-workspace exists on the host")
	}
}

// hostPath maps a path inside the sandbox's workspace to the host, when the
// workspace is a host directory (mounted at its own path or elsewhere:
// workspace_mount); "" otherwise.
func (s *suite) hostPath(bx *box, inside string) string {
	fsp := bx.spec.Policy.Filesystem
	ws := fsp.WorkspacePath()
	if ws == "" || s.opts.HelperDir != "" {
		return ""
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return ""
	}
	if rel, err := filepath.Rel(fsp.WorkspaceInside(), inside); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join(ws, rel)
	}
	return ""
}
