package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/airlock-dev/airlock/internal/testutil"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

func readAll(t testing.TB, f sandbox.Files, p string) ([]byte, error) {
	t.Helper()
	rc, err := f.ReadFile(testCtx(t), p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestFilesRoundTrip(t *testing.T) {
	t.Run("openat2", func(t *testing.T) { testFilesRoundTrip(t, nil) })
	t.Run("walk", func(t *testing.T) { testFilesRoundTrip(t, []string{"AGENT_TEST_NO_OPENAT2=1"}) })
}

func testFilesRoundTrip(t *testing.T, env []string) {
	root := t.TempDir()
	g := startGuest(t, guestOptions{root: root, extraEnv: env})
	f := g.client.Files()
	ctx := testCtx(t)

	data := make([]byte, 3<<20+17)
	rand.Read(data)
	if err := f.WriteFile(ctx, "/a/b/c.bin", bytes.NewReader(data), 0o600, true); err != nil {
		t.Fatal(err)
	}
	// On disk, under the root, with exactly the mode asked for.
	onDisk, err := os.ReadFile(filepath.Join(root, "a/b/c.bin"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("on disk: %v, %d bytes", err, len(onDisk))
	}
	got, err := readAll(t, f, "/a/b/c.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v, %d bytes", err, len(got))
	}
	fi, err := f.Stat(ctx, "/a/b/c.bin")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name != "c.bin" || fi.Path != "/a/b/c.bin" || fi.Size != int64(len(data)) || fi.Mode != 0o600 || fi.IsDir || fi.ModTime.Before(time.Now().Add(-time.Hour)) {
		t.Fatalf("stat: %+v", fi)
	}
	// Truncate and rewrite; empty file.
	if err := f.WriteFile(ctx, "/a/b/c.bin", strings.NewReader("short"), 0o640, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, f, "/a/b/c.bin"); string(got) != "short" {
		t.Fatalf("rewrite: %q", got)
	}
	if err := f.WriteFile(ctx, "/empty", nil, 0, false); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(ctx, "/empty"); err != nil || fi.Size != 0 || fi.Mode != 0o644 {
		t.Fatalf("empty: %+v %v", fi, err)
	}

	// Directories.
	if err := f.Mkdir(ctx, "/d", 0o700, false); err != nil {
		t.Fatal(err)
	}
	if err := f.Mkdir(ctx, "/d", 0o700, false); !errors.Is(err, sandbox.ErrExists) {
		t.Fatalf("mkdir existing: %v", err)
	}
	if err := f.Mkdir(ctx, "/d", 0o700, true); err != nil {
		t.Fatalf("mkdir -p existing: %v", err)
	}
	if err := f.Mkdir(ctx, "/x/y/z", 0o750, true); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(ctx, "/x/y/z"); err != nil || !fi.IsDir || fi.Mode.Perm() != 0o750 {
		t.Fatalf("stat dir: %+v %v", fi, err)
	}
	if err := f.Mkdir(ctx, "/nope/child", 0o755, false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("mkdir without parent: %v", err)
	}
	if err := f.Mkdir(ctx, "/a/b/c.bin/sub", 0o755, true); err == nil {
		t.Fatal("mkdir -p through a file succeeded")
	}

	// List.
	for i := 0; i < 3; i++ {
		if err := f.WriteFile(ctx, fmt.Sprintf("/d/f%d", i), strings.NewReader("x"), 0o644, false); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("f0", filepath.Join(root, "d/link"))
	ents, err := f.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
		if e.Path != "/d/"+e.Name {
			t.Errorf("entry path %q", e.Path)
		}
	}
	if strings.Join(names, ",") != "f0,f1,f2,link" || ents[3].Link != "f0" || ents[3].Mode&fs.ModeSymlink == 0 || ents[0].Size != 1 {
		t.Fatalf("list: %+v", ents)
	}
	// Stat does not follow a final symlink.
	if fi, err := f.Stat(ctx, "/d/link"); err != nil || fi.Link != "f0" || fi.Mode&fs.ModeSymlink == 0 {
		t.Fatalf("stat link: %+v %v", fi, err)
	}

	// Rename and remove.
	if err := f.Rename(ctx, "/d/f0", "/x/moved"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(ctx, "/d/f0"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("stat renamed: %v", err)
	}
	if got, _ := readAll(t, f, "/x/moved"); string(got) != "x" {
		t.Fatalf("moved: %q", got)
	}
	if err := f.Remove(ctx, "/d", false); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("remove non-empty dir: %v", err)
	}
	if err := f.Remove(ctx, "/d/link", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "d/f1")); err != nil {
		t.Fatal("removing a link removed its target")
	}
	if err := f.Remove(ctx, "/d", true); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, "/d", true); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("remove missing: %v", err)
	}
	if err := f.Remove(ctx, "/x/y", false); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("remove non-empty: %v", err)
	}
	if err := f.Remove(ctx, "/x/y/z", false); err != nil {
		t.Fatalf("remove empty dir: %v", err)
	}
}

func TestFilesErrors(t *testing.T) {
	t.Run("openat2", func(t *testing.T) { testFilesErrors(t, nil) })
	t.Run("walk", func(t *testing.T) { testFilesErrors(t, []string{"AGENT_TEST_NO_OPENAT2=1"}) })
}

func testFilesErrors(t *testing.T, env []string) {
	root := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(root, "dir"), 0o755)
	os.Symlink("loop", filepath.Join(root, "loop"))
	g := startGuest(t, guestOptions{root: root, extraEnv: env})
	f := g.client.Files()
	ctx := testCtx(t)
	tests := []struct {
		name string
		err  error
		kind error
	}{
		{"relative", f.WriteFile(ctx, "rel/x", strings.NewReader("x"), 0o644, true), sandbox.ErrInvalid},
		{"unclean", f.Mkdir(ctx, "/a/../b", 0o755, true), sandbox.ErrInvalid},
		{"trailing slash", f.Remove(ctx, "/dir/", false), sandbox.ErrInvalid},
		{"nul", f.Remove(ctx, "/a\x00b", false), sandbox.ErrInvalid},
		{"empty", f.Rename(ctx, "", "/x"), sandbox.ErrInvalid},
		{"remove root", f.Remove(ctx, "/", true), sandbox.ErrInvalid},
		{"rename root", f.Rename(ctx, "/", "/x"), sandbox.ErrInvalid},
		{"mode bits", f.WriteFile(ctx, "/x", nil, fs.ModeSetuid|0o755, false), sandbox.ErrInvalid},
		{"missing parent", f.WriteFile(ctx, "/no/such/x", strings.NewReader("x"), 0o644, false), sandbox.ErrNotFound},
		{"write a directory", f.WriteFile(ctx, "/dir", strings.NewReader("x"), 0o644, false), sandbox.ErrInvalid},
		{"write a fifo", f.WriteFile(ctx, "/fifo", strings.NewReader("x"), 0o644, false), sandbox.ErrInvalid},
		{"rename missing", f.Rename(ctx, "/missing", "/x"), sandbox.ErrNotFound},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.kind) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.err, tt.kind)
		}
	}
	if _, err := readAll(t, f, "/dir"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("read a directory: %v", err)
	}
	// A FIFO without writer would block a naive open forever.
	if _, err := readAll(t, f, "/fifo"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("read a fifo: %v", err)
	}
	if _, err := readAll(t, f, "/loop"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("read a symlink loop: %v", err)
	}
	if _, err := readAll(t, f, "/missing"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("read missing: %v", err)
	}
	if _, err := f.List(ctx, "/fifo"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("list a fifo: %v", err)
	}
	if _, err := f.Stat(ctx, "relative"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("stat relative: %v", err)
	}
	// A reader error aborts the write.
	werr := errors.New("source broke")
	if err := f.WriteFile(ctx, "/partial", io.MultiReader(strings.NewReader("abc"), errReader{werr}), 0o644, false); !errors.Is(err, werr) {
		t.Errorf("write with failing source: %v", err)
	}
	if err := g.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestFilesGuestRechecksPaths sends bad paths straight to the guest,
// bypassing the host's checks: the guest refuses them too.
func TestFilesGuestRechecksPaths(t *testing.T) {
	root := t.TempDir()
	g := startGuest(t, guestOptions{root: root})
	ctx := testCtx(t)
	for _, p := range []string{"../../etc/passwd", "/a/../../etc/passwd", "/etc/\x00", "", "//etc"} {
		for _, op := range []string{opRead, opStat, opList, opRemove, opMkdir} {
			_, _, err := g.client.roundTrip(ctx, op, &request{Op: op, Path: p, Mode: 0o755})
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Errorf("%s %q: got %v", op, p, err)
			}
		}
	}
	_, _, err := g.client.roundTrip(ctx, "rename", &request{Op: opRename, Path: "/a", To: "../b"})
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("rename to relative: %v", err)
	}
}

// TestFilesTraversal attacks the root from inside: symlinks planted by a
// sandboxed process must not lead file operations out of it.
func TestFilesTraversal(t *testing.T) {
	t.Run("openat2", func(t *testing.T) { testTraversal(t, nil) })
	// The fallback resolver for kernels without openat2.
	t.Run("walk", func(t *testing.T) { testTraversal(t, []string{"AGENT_TEST_NO_OPENAT2=1"}) })
}

func testTraversal(t *testing.T, env []string) {
	root := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("host secret"), 0o600)
	outside := filepath.Dir(secret)
	links := map[string]string{
		"abs":      outside,                                          // absolute link to a host dir
		"rel":      strings.Repeat("../", 20) + outside[1:],          // relative climb
		"file":     secret,                                           // absolute link to the file
		"procroot": "/proc/self/root" + outside,                      // magic link
		"dotdot":   "../../../../../../../../../../../../" + outside, // climbs past the root
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Unconfined, every link reaches the secret.
	for name := range links {
		p := filepath.Join(root, name)
		if name != "file" {
			p = filepath.Join(p, "secret")
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "host secret" {
			t.Fatalf("attack %s does not work unconfined: %v", name, err)
		}
	}
	g := startGuest(t, guestOptions{root: root, extraEnv: env})
	f := g.client.Files()
	ctx := testCtx(t)
	for name := range links {
		p := "/" + name
		if name != "file" {
			p += "/secret"
		}
		if b, err := readAll(t, f, p); err == nil {
			t.Errorf("read %s escaped the root: %q", p, b)
		}
		if err := f.WriteFile(ctx, p, strings.NewReader("pwned"), 0o644, false); err == nil {
			t.Errorf("write %s escaped the root", p)
		}
		if _, err := f.List(ctx, "/"+name); err == nil && name != "file" {
			ents, _ := f.List(ctx, "/"+name)
			for _, e := range ents {
				if e.Name == "secret" {
					t.Errorf("list %s escaped the root", name)
				}
			}
		}
		if name == "file" {
			continue // the link itself is the final component: see below
		}
		if err := f.Remove(ctx, p, true); err == nil {
			t.Errorf("remove %s escaped the root", p)
		}
		if err := f.Rename(ctx, p, "/stolen"); err == nil {
			t.Errorf("rename %s escaped the root", p)
		}
		if err := f.Mkdir(ctx, "/"+name+"/newdir", 0o755, true); err == nil {
			if _, serr := os.Stat(filepath.Join(outside, "newdir")); serr == nil {
				t.Errorf("mkdir through %s escaped the root", name)
			}
		}
	}
	// Removing or renaming a link acts on the link, never its target.
	if err := f.Rename(ctx, "/file", "/file2"); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, "/file2", true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "host secret" {
		t.Fatalf("secret changed: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "newdir")); err == nil {
		t.Fatal("directory created outside the root")
	}
	// An absolute link resolves inside the root: it names the sandbox's
	// own file, as a process inside would see it.
	os.MkdirAll(filepath.Join(root, outside), 0o755)
	os.WriteFile(filepath.Join(root, outside, "secret"), []byte("inside"), 0o644)
	if b, err := readAll(t, f, "/abs/secret"); err != nil || string(b) != "inside" {
		t.Fatalf("in-root resolution: %q %v", b, err)
	}
}

// TestFilesMagicLinkRootSlash: with "/" as the root (as after pivot_root),
// /proc/self/root and /proc/<pid>/cwd links are still refused.
func TestFilesMagicLinkRootSlash(t *testing.T) {
	if _, err := os.ReadFile("/proc/self/root/etc/hostname"); err != nil {
		testutil.Skip(t, "no /etc/hostname to use as the target")
	}
	g := startGuest(t, guestOptions{})
	if _, err := readAll(t, g.client.Files(), "/proc/self/root/etc/hostname"); err == nil {
		t.Fatal("magic link followed")
	}
	if _, err := readAll(t, g.client.Files(), "/etc/hostname"); err != nil {
		t.Fatalf("plain path: %v", err)
	}
}

func TestFilesLargeListAndEarlyClose(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 3000; i++ {
		os.WriteFile(filepath.Join(root, fmt.Sprintf("file-with-a-longish-name-%05d", i)), nil, 0o644)
	}
	big := make([]byte, 8<<20)
	os.WriteFile(filepath.Join(root, "big"), big, 0o644)
	g := startGuest(t, guestOptions{root: root})
	f := g.client.Files()
	ctx := testCtx(t)
	ents, err := f.List(ctx, "/")
	if err != nil || len(ents) != 3001 {
		t.Fatalf("list: %d entries, %v", len(ents), err)
	}
	// Close after a little: the transfer stops and the session stays usable.
	for i := 0; i < 20; i++ {
		rc, err := f.ReadFile(ctx, "/big")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(rc, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		if _, err := rc.Read(make([]byte, 1)); err == nil {
			t.Fatal("read after close")
		}
	}
	if err := g.client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// ReadFile honours its context for the whole read.
	cctx, cancel := context.WithCancel(ctx)
	rc, err := f.ReadFile(cctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(rc); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
	rc.Close()
	// And the host can bound a read.
	rc, _ = f.ReadFile(ctx, "/big")
	n, _ := io.Copy(io.Discard, io.LimitReader(rc, 1<<20))
	rc.Close()
	if n != 1<<20 {
		t.Fatalf("limited read %d", n)
	}
}
