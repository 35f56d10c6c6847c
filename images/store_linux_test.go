package images_test

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
)

func newStore(t *testing.T) *images.Store {
	t.Helper()
	testutil.RequireLinux(t)
	s, err := images.Open(filepath.Join(t.TempDir(), "store"), images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// entries lists a store directory's entries ("" when missing).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// assertEmpty checks that a failed operation left nothing: no image, no
// layer, no blob, nothing in tmp/.
func assertEmpty(t *testing.T, s *images.Store) {
	t.Helper()
	ctx := context.Background()
	if ims, err := s.List(ctx); err != nil || len(ims) != 0 {
		t.Errorf("images after failure: %v %v", ims, err)
	}
	for _, d := range []string{"layers/sha256", "blobs/sha256", "tmp"} {
		if got := entries(t, filepath.Join(s.Root(), d)); len(got) != 0 {
			t.Errorf("%s after failure: %v", d, got)
		}
	}
}

func TestPullListInspectRemovePrune(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	reg := imagestest.NewRegistry(t, "", "")
	img := imagestest.Busybox(t)
	ref := reg.Push(t, "tools/busybox:1", img)
	var phases []string
	im, err := s.Pull(ctx, ref, images.PullOptions{Progress: func(p images.Progress) { phases = append(phases, p.Phase) }})
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ := img.ConfigName()
	if im.ID != wantID.String() {
		t.Errorf("ID %s, want %s", im.ID, wantID)
	}
	if len(im.Names) != 1 || im.Names[0] != ref || im.Config.Cmd[0] != "sh" || im.Platform == "" {
		t.Errorf("image %+v", im)
	}
	if !strings.Contains(strings.Join(phases, ","), "download") {
		t.Errorf("no download progress: %v", phases)
	}
	for _, q := range []string{ref, im.ID, im.ShortID(), reg.Host + "/tools/busybox@" + im.Digest} {
		got, err := s.Inspect(ctx, q)
		if err != nil || got.ID != im.ID {
			t.Errorf("Inspect(%q) = %v, %v", q, got, err)
		}
	}
	if _, err := s.Inspect(ctx, "nope:1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Inspect(missing) = %v, want not found", err)
	}
	r, err := s.Acquire(ctx, ref, "t1", images.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(r.Layers[0], "bin/busybox")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("unpacked busybox: %v %v", fi, err)
	}
	r.Release()

	// Pulled again: nothing downloaded.
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	before := reg.Gets(ld.String())
	if _, err := s.Pull(ctx, ref, images.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := reg.Gets(ld.String()) - before; n != 0 {
		t.Errorf("second pull fetched the layer %d times", n)
	}
	if ims, _ := s.List(ctx); len(ims) != 1 {
		t.Errorf("list: %v", ims)
	}
	if _, err := s.Remove(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inspect(ctx, ref); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("after remove: %v", err)
	}
	rep, err := s.Prune(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Layers != 1 || rep.Blobs != 3 {
		t.Errorf("prune: %+v", rep)
	}
	assertEmpty(t, s)
}

func TestPullAuthFromDockerConfig(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	reg := imagestest.NewRegistry(t, "agent", "s3cret")
	ref := reg.Push(t, "private/busybox:1", imagestest.Busybox(t))
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials
	_, err := s.Pull(ctx, ref, images.PullOptions{})
	if !errors.Is(err, errdefs.ErrPermission) || !strings.Contains(err.Error(), "Docker config") {
		t.Fatalf("pull without credentials: %v, want permission denied naming the Docker config", err)
	}
	assertEmpty(t, s)
	reg.DockerConfig(t)
	if _, err := s.Pull(ctx, ref, images.PullOptions{}); err != nil {
		t.Fatalf("pull with credentials: %v", err)
	}
}

func TestPullBrokenConnectionLeavesNothing(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	reg := imagestest.NewRegistry(t, "", "")
	img := imagestest.Busybox(t)
	ref := reg.Push(t, "busybox:1", img)
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	reg.Break.Store(d.String())
	_, err := s.Pull(ctx, ref, images.PullOptions{})
	if err == nil || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("pull over a broken connection: %v, want unavailable", err)
	}
	t.Logf("error: %v", err)
	assertEmpty(t, s)
	if _, err := s.Pull(ctx, ref, images.PullOptions{}); err != nil {
		t.Fatalf("pull again: %v", err)
	}
}

func TestPullCorruptLayerLeavesNothing(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	reg := imagestest.NewRegistry(t, "", "")
	img := imagestest.Busybox(t)
	ref := reg.Push(t, "busybox:1", img)
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	reg.Corrupt.Store(d.String())
	_, err := s.Pull(ctx, ref, images.PullOptions{})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), d.String()) {
		t.Fatalf("pull of a corrupt layer: %v, want an error naming %s", err, d)
	}
	t.Logf("error: %v", err)
	assertEmpty(t, s)
}

// A config whose diff ID does not match the layer's content.
func TestDiffIDMismatchLeavesNothing(t *testing.T) {
	s := newStore(t)
	img := imagestest.Image(t, v1.Config{}, imagestest.Layer(t, imagestest.Tar(t, imagestest.Entry{Name: "a", Data: "a"})))
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[0] = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	bad, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "bad.tar")
	writeTarball(t, p, "bad:1", bad)
	_, err = s.Import(context.Background(), p, images.ImportOptions{})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "diff ID") {
		t.Fatalf("import: %v, want a diff ID mismatch", err)
	}
	assertEmpty(t, s)
}

func writeTarball(t *testing.T, p, tag string, img v1.Image) {
	t.Helper()
	tg, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(p, tg, img); err != nil {
		t.Fatal(err)
	}
}

func TestImportTarballAndLayoutExportRoundTrip(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	img := imagestest.Busybox(t)
	p := filepath.Join(t.TempDir(), "bb.tar")
	writeTarball(t, p, "example.com/bb:v1", img)
	ims, err := s.Import(ctx, p, images.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ims) != 1 || ims[0].Names[0] != "example.com/bb:v1" {
		t.Fatalf("imported %+v", ims)
	}
	// An OCI layout with a ref name.
	dir := filepath.Join(t.TempDir(), "oci")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "example.com/bb:layout"})); err != nil {
		t.Fatal(err)
	}
	ims2, err := s.Import(ctx, dir, images.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ims2) != 1 || ims2[0].ID != ims[0].ID {
		t.Fatalf("layout import %+v, want the same image", ims2)
	}
	got, _ := s.Inspect(ctx, "example.com/bb:layout")
	if got == nil || len(got.Names) != 2 {
		t.Errorf("names after both imports: %+v", got)
	}
	// Export, and import the export into another store.
	out := filepath.Join(t.TempDir(), "export.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Export(ctx, "example.com/bb:v1", f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s2 := newStore(t)
	ims3, err := s2.Import(ctx, out, images.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ims3[0].ID != ims[0].ID {
		t.Errorf("re-imported ID %s, want %s", ims3[0].ID, ims[0].ID)
	}
	// --tag with an archive of one image.
	if ims4, err := s2.Import(ctx, out, images.ImportOptions{Tag: "renamed"}); err != nil || ims4[0].Names[len(ims4[0].Names)-1] != "index.docker.io/library/renamed:latest" {
		t.Errorf("import --tag: %+v %v", ims4, err)
	}
	if _, err := s2.Import(ctx, t.TempDir(), images.ImportOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("import of an empty dir: %v", err)
	}
}

func TestConcurrentPullsShareLayers(t *testing.T) {
	s := newStore(t)
	reg := imagestest.NewRegistry(t, "", "")
	ref := reg.Push(t, "busybox:1", imagestest.Busybox(t))
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Pull(context.Background(), ref, images.PullOptions{})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := entries(t, filepath.Join(s.Root(), "layers/sha256")); len(got) != 1 {
		t.Errorf("layers: %v", got)
	}
	if got := entries(t, filepath.Join(s.Root(), "tmp")); len(got) != 0 {
		t.Errorf("tmp: %v", got)
	}
}

func TestLeaseKeepsImageUntilReleased(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "bb.tar")
	writeTarball(t, p, "bb:1", imagestest.Busybox(t))
	if _, err := s.Import(ctx, p, images.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Acquire(ctx, "bb:1", "sandbox-1", images.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "bb:1", "sandbox-1", images.AcquireOptions{}); !errors.Is(err, errdefs.ErrExists) {
		t.Errorf("second lease of one holder: %v", err)
	}
	if _, err := s.Remove(ctx, "bb:1"); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Prune(ctx, true); err != nil || rep.Layers != 0 {
		t.Fatalf("prune while in use: %+v %v", rep, err)
	}
	if _, err := os.Stat(r.Layers[0]); err != nil {
		t.Fatalf("layer of an image in use: %v", err)
	}
	r.Release()
	if rep, err := s.Prune(ctx, false); err != nil || rep.Layers != 1 {
		t.Fatalf("prune after release: %+v %v", rep, err)
	}
	assertEmpty(t, s)
}

// A lease file whose holder died (its lock went with it: a restarted
// server's paused sandbox) is taken over by the same holder; a live one
// is not.
func TestDeadHoldersLeaseTakenOver(t *testing.T) {
	testutil.RequireLinux(t)
	root := filepath.Join(t.TempDir(), "store")
	s, err := images.Open(root, images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "bb.tar")
	writeTarball(t, p, "bb:1", imagestest.Busybox(t))
	if _, err := s.Import(ctx, p, images.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "leases"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "leases", "sb-dead"), []byte("sha256:0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := s.Acquire(ctx, "bb:1", "sb-dead", images.AcquireOptions{})
	if err != nil {
		t.Fatalf("lease of a dead holder: %v", err)
	}
	if _, err := s.Acquire(ctx, "bb:1", "sb-dead", images.AcquireOptions{}); !errors.Is(err, errdefs.ErrExists) {
		t.Errorf("lease of a live holder taken: %v", err)
	}
	if rep, err := s.Prune(ctx, true); err != nil || rep.Layers != 0 {
		t.Fatalf("prune while the taken-over lease is held: %+v %v", rep, err)
	}
	r.Release()
}

func TestSetIDStrippedUnlessAsked(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	img := imagestest.Image(t, v1.Config{}, imagestest.Layer(t, imagestest.Tar(t,
		imagestest.Entry{Name: "bin/", Type: tar.TypeDir},
		imagestest.Entry{Name: "bin/su", Mode: 0o4755, Data: "#!/bin/sh\n"},
		imagestest.Entry{Name: "bin/wall", Mode: 0o2755, Data: "#!/bin/sh\n"},
		imagestest.Entry{Name: "bin/ping", Mode: 0o755, Data: "x", Xattrs: map[string]string{"security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}},
		imagestest.Entry{Name: "shared/", Type: tar.TypeDir, Mode: 0o2775},
	)))
	p := filepath.Join(t.TempDir(), "s.tar")
	writeTarball(t, p, "setid:1", img)
	if _, err := s.Import(ctx, p, images.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Acquire(ctx, "setid:1", "a", images.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	mode := func(p string) os.FileMode {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	for _, f := range []string{"bin/su", "bin/wall"} {
		if m := mode(filepath.Join(r.Layers[0], f)); m&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s kept set-id bits: %v", f, m)
		}
	}
	if m := mode(filepath.Join(r.Layers[0], "shared")); m&os.ModeSetgid == 0 {
		t.Errorf("set-gid directory lost its bit (harmless, kept): %v", m)
	}
	if _, err := unix.Lgetxattr(filepath.Join(r.Layers[0], "bin/ping"), "security.capability", make([]byte, 64)); err == nil {
		t.Errorf("file capability kept")
	}
	testutil.RequireRoot(t) // keeping them needs the owner (root)
	r2, err := s.Acquire(ctx, "setid:1", "b", images.AcquireOptions{SetID: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Release()
	if m := mode(filepath.Join(r2.Layers[0], "bin/su")); m&os.ModeSetuid == 0 {
		t.Errorf("SetID variant lost the set-uid bit: %v", m)
	}
	if r2.Layers[0] == r.Layers[0] {
		t.Errorf("SetID variant shares the stripped directory")
	}
}

func TestApplyConfig(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	img := imagestest.Image(t, v1.Config{Env: []string{"PATH=/img/bin", "A=1"}, User: "user", WorkingDir: "/srv/app"},
		imagestest.Layer(t, imagestest.BusyboxTar(t)),
		imagestest.Layer(t, imagestest.Tar(t, imagestest.Entry{Name: "etc/.wh.group"})))
	p := filepath.Join(t.TempDir(), "i.tar")
	writeTarball(t, p, "cfg:1", img)
	if _, err := s.Import(ctx, p, images.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Acquire(ctx, "cfg:1", "x", images.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if _, err := r.ReadFile("/etc/group"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("whited-out /etc/group read: %v", err)
	}
	if b, err := r.ReadFile("etc/passwd"); err != nil || !strings.Contains(string(b), "user:x:1000") {
		t.Errorf("/etc/passwd: %q %v", b, err)
	}
	var pol policy.Policy
	pol.Process.Env = map[string]string{"A": "policy"}
	if err := r.Apply(&pol); err != nil {
		t.Fatal(err)
	}
	if *pol.Process.UID != 1000 || *pol.Process.GID != 1000 || pol.Process.Workdir != "/srv/app" || pol.Filesystem.Image != "cfg:1" {
		t.Errorf("applied: %+v %+v", pol.Process, pol.Filesystem)
	}
	if pol.Process.Env["A"] != "policy" || pol.Process.Env["PATH"] != "/img/bin" || pol.Process.Env["HOME"] != "/home/user" {
		t.Errorf("env %v", pol.Process.Env)
	}
	if _, err := r.User("user:staff"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("group from a whited-out /etc/group: %v", err)
	}
}

// What a killed pull left (a staging dir whose lock nobody holds) is
// swept by the next Open; one still in use is not.
func TestStaleTempSwept(t *testing.T) {
	testutil.RequireLinux(t)
	root := filepath.Join(t.TempDir(), "store")
	if _, err := images.Open(root, images.Options{}); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(root, "tmp", "layer-dead")
	os.MkdirAll(filepath.Join(stale, "layer", "fs", "usr"), 0o755)
	os.WriteFile(stale+".lock", nil, 0o600)
	live := filepath.Join(root, "tmp", "layer-live")
	os.MkdirAll(live, 0o755)
	f, err := os.OpenFile(live+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := images.Open(root, images.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale staging dir kept: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("staging dir in use removed: %v", err)
	}
}
