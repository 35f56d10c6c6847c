package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// airlockAs runs bin in dir as uid (0: as we are) with env, returning
// stdout, stderr and the exit code.
func airlockAs(t *testing.T, uid uint32, bin, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runAs(t, int(uid), int(uid), nil, bin, dir, env, args...)
}

// importBusybox imports the busybox test image as bb:1 into store, as uid.
func importBusybox(t *testing.T, uid uint32, bin, store string) {
	t.Helper()
	importImage(t, uid, bin, store, "bb:1", imagestest.Busybox(t))
}

// importImage imports img as ref into store, as uid.
func importImage(t *testing.T, uid uint32, bin, store, ref string, img v1.Image) {
	t.Helper()
	tarPath := filepath.Join(filepath.Dir(store), "img.tar")
	tg, _ := name.NewTag(ref)
	if err := tarball.WriteToFile(tarPath, tg, img); err != nil {
		t.Fatal(err)
	}
	os.Chown(tarPath, int(uid), int(uid))
	env := []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "AIRLOCK_IMAGE_STORE=" + store}
	if _, errs, code := airlockAs(t, uid, bin, filepath.Dir(store), env, "image", "import", tarPath); code != 0 {
		t.Fatalf("import as %d: %d %q", uid, code, errs)
	}
}

// Issue 25 item 7: `airlock run --image` as root gives the image a leased
// host id range, as serve's sandboxes have. Root inside can give files to
// other ids (what failed with EINVAL before); what it writes in the
// workspace (through the write mediator, on the idmapped workspace) is
// the caller's on the host; and the range reaches no host file of another
// id: a file of uid 1234 in the workspace, which the caller (root)
// reads unconfined, is neither readable, writable nor re-ownable inside.
func TestRunImageHostIDs(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	store := filepath.Join(dir, "store")
	bin := testutil.AirlockBinary(t)
	importBusybox(t, 0, bin, store)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	other := filepath.Join(ws, "other")
	if err := os.WriteFile(other, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(other, 1234, 1234)
	if b, err := os.ReadFile(other); err != nil || string(b) != "secret\n" { // the attack works unconfined
		t.Fatalf("unconfined read of the other id's file: %q %v", b, err)
	}
	script := `id -u
touch /tmp/f && chown 65534:65534 /tmp/f && stat -c 'chown %u:%g' /tmp/f
echo hi > /workspace/byroot && mkdir /workspace/d && echo wrote
stat -c 'mine %u' /workspace/byroot
cat /workspace/other && echo READ-OTHER
echo x >> /workspace/other && echo WROTE-OTHER
chown 0:0 /workspace/other && echo CHOWNED-OTHER
stat -c 'other %u' /workspace/other
true`
	// A --rw path under a directory only the caller may enter is bound
	// idmapped too.
	rw := filepath.Join(t.TempDir(), "rw")
	os.Mkdir(rw, 0o755)
	script += "\necho x > " + rw + "/f && stat -c 'rw %u' " + rw + "/f"
	env := []string{"PATH=/usr/bin:/bin", "HOME=/root", "AIRLOCK_IMAGE_STORE=" + store}
	out, errs, code := airlockAs(t, 0, bin, ws, env, "run", "--image", "bb:1", "--rw", rw, "--", "sh", "-c", script)
	t.Logf("inside:\n%s\nstderr: %s", out, errs)
	if code != 0 {
		t.Fatalf("run: %d %q %q", code, out, errs)
	}
	for _, want := range []string{"0\n", "chown 65534:65534\n", "wrote\n", "mine 0\n", "other 65534\n", "rw 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inside: no %q in %q", want, out)
		}
	}
	for _, bad := range []string{"secret", "READ-OTHER", "WROTE-OTHER", "CHOWNED-OTHER"} {
		if strings.Contains(out, bad) {
			t.Errorf("the range reached the other id's file: %q in %q", bad, out)
		}
	}
	for _, p := range []string{filepath.Join(ws, "byroot"), filepath.Join(ws, "d"), filepath.Join(rw, "f")} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s on the host: %v uid %d gid %d, want the caller's 0:0", p, err, st.Uid, st.Gid)
		}
	}
	var st syscall.Stat_t
	if b, _ := os.ReadFile(other); string(b) != "secret\n" || syscall.Lstat(other, &st) != nil || st.Uid != 1234 {
		t.Errorf("the other id's file changed: %q uid %d", b, st.Uid)
	}
	noMountOf(t, ws)
}

// A normal user's `run --image` on native is refused before anything
// starts (exit 125, saying why and what to do), not run half-working
// with one id.
func TestRunImageNormalUserRefused(t *testing.T) {
	testutil.RequireRoot(t) // to become the normal user
	const uid = 65534
	bin, ws := userWorkspace(t, uid)
	store := filepath.Join(filepath.Dir(ws), "store")
	os.Mkdir(store, 0o700)
	os.Chown(store, uid, uid)
	importBusybox(t, uid, bin, store)
	env := []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "AIRLOCK_IMAGE_STORE=" + store}
	out, errs, code := airlockAs(t, uid, bin, ws, env, "run", "--backend", "native", "--image", "bb:1", "--", "id", "-u")
	if code != 125 || out != "" || !strings.Contains(errs, "/etc/subuid has no entry for nobody") || !strings.Contains(errs, "sandbox create --image") {
		t.Fatalf("normal user's run --image: %d %q %q", code, out, errs)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("left in the workspace: %v", ents)
	}
	noMountOf(t, ws)
}

// noMountOf fails if the host has a mount at or below dir.
func noMountOf(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), " "+dir) {
		t.Errorf("a mount of %s left on the host", dir)
	}
}

// When the workspace cannot be bound idmapped (ramfs has no idmapped
// mounts), the run fails closed before the command (125, naming it) and
// leaves nothing: no mount on the host, no file in the workspace, no
// process of ours stopped at its exec (the namespace holder).
func TestRunImageHostIDsFailsClosed(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	store := filepath.Join(dir, "store")
	bin := testutil.AirlockBinary(t)
	importBusybox(t, 0, bin, store)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	if err := syscall.Mount("ramfs", ws, "ramfs", 0, "mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(ws, syscall.MNT_DETACH) })
	env := []string{"PATH=/usr/bin:/bin", "HOME=/root", "AIRLOCK_IMAGE_STORE=" + store}
	out, errs, code := airlockAs(t, 0, bin, ws, env, "run", "--image", "bb:1", "--", "sh", "-c", "echo ran > /workspace/f")
	if code != 125 || out != "" || !strings.Contains(errs, "idmapped mount") {
		t.Fatalf("run on a ramfs workspace: %d %q %q", code, out, errs)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("left in the workspace: %v", ents)
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	if n := strings.Count(string(b), " "+ws+" "); n != 1 {
		t.Errorf("mounts at %s: %d, want only the test's ramfs", ws, n)
	}
	stoppedHolders(t, bin)
}

// stoppedHolders fails if a process running bin is stopped by a tracer.
func stoppedHolders(t *testing.T, bin string) {
	t.Helper()
	ps, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range ps {
		st, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(st, ')'); i < 0 || i+2 >= len(st) || st[i+2] != 't' {
			continue
		}
		if exe, _ := os.Readlink(filepath.Join(filepath.Dir(p), "exe")); exe == bin {
			t.Errorf("a holder left stopped: %s", filepath.Dir(p))
		}
	}
}

// What the issue found failing under `run --image` as root, in the
// mmdebstrap Debian image: a process dropping to a system user (apt's
// _apt), files given to other users, tar keeping owners.
func TestRunImageDebianUsers(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	store := filepath.Join(dir, "store")
	bin := testutil.AirlockBinary(t)
	importImage(t, 0, bin, store, "deb:1", imagestest.Debian(t))
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	script := `set -e
runuser -u _apt -- sh -c 'id -un; echo x > /tmp/apt-file'
stat -c 'apt-file %U' /tmp/apt-file
mkdir -p /tmp/t/a && touch /tmp/t/a/f && chown -R nobody:nogroup /tmp/t/a
tar -C /tmp/t -cf /tmp/t.tar a && mkdir /tmp/x && tar -C /tmp/x -xpf /tmp/t.tar
stat -c 'extracted %U:%G' /tmp/x/a/f
tar -C /tmp/t -cf /workspace/a.tar a && echo saved`
	env := []string{"PATH=/usr/bin:/bin", "HOME=/root", "AIRLOCK_IMAGE_STORE=" + store}
	out, errs, code := airlockAs(t, 0, bin, ws, env, "run", "--image", "deb:1", "--", "bash", "-c", script)
	if code != 0 || out != "_apt\napt-file _apt\nextracted nobody:nogroup\nsaved\n" {
		t.Fatalf("debian users: %d %q %q", code, out, errs)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(ws, "a.tar"), &st); err != nil || st.Uid != 0 {
		t.Errorf("a.tar on the host: %v uid %d, want the caller's", err, st.Uid)
	}
}

// With a policy's non-root user, that user (not root) stands for the
// caller in the workspace: it writes there as the caller, root inside
// owns nothing there.
func TestRunImageHostIDsPolicyUser(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	store := filepath.Join(dir, "store")
	bin := testutil.AirlockBinary(t)
	importBusybox(t, 0, bin, store)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	pol := filepath.Join(dir, "p.yaml")
	os.WriteFile(pol, []byte("version: 1\nprocess:\n  uid: 1000\n  gid: 1000\n"), 0o644)
	env := []string{"PATH=/usr/bin:/bin", "HOME=/root", "AIRLOCK_IMAGE_STORE=" + store}
	out, errs, code := airlockAs(t, 0, bin, ws, env, "run", "--policy", pol, "--image", "bb:1", "--", "sh", "-c",
		"id -u; echo hi > /workspace/f && stat -c 'f %u' /workspace/f; stat -c 'ws %u' /workspace")
	if code != 0 || out != "1000\nf 1000\nws 1000\n" {
		t.Fatalf("policy user: %d %q %q", code, out, errs)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(ws, "f"), &st); err != nil || st.Uid != 0 || st.Gid != 0 {
		t.Errorf("f on the host: %v uid %d gid %d, want the caller's 0:0", err, st.Uid, st.Gid)
	}
}
