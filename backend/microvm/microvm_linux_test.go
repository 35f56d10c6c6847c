package microvm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// TestBootExecFiles boots a VM without a template (the cold path), runs a
// command that sees the workspace through 9p and the host's system dirs,
// and moves a file both ways.
func TestBootExecFiles(t *testing.T) {
	b := testBackend(t, true)
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := create(t, b, sandbox.Spec{Policy: testPolicy(t, ws, false)})
	if s.(*vmSandbox).restored {
		t.Fatal("restored with templates off")
	}
	st, out := sh(t, s, "cat hello.txt && echo && uname -r && cat /proc/1/comm && echo written > out.txt")
	if st.Code != 0 || !strings.Contains(out, "from host") || !strings.Contains(out, "-amd64") {
		t.Fatalf("status %+v output %q", st, out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "written\n" {
		t.Fatalf("host sees %q, %v", b, err)
	}
	ctx := context.Background()
	if err := s.Files().WriteFile(ctx, filepath.Join(ws, "api.txt"), strings.NewReader("via api"), 0o600, false); err != nil {
		t.Fatal(err)
	}
	r, err := s.Files().ReadFile(ctx, filepath.Join(ws, "api.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "via api" {
		t.Fatalf("read back %q", got)
	}
	// The guest runs its own kernel: the host's is not the sandbox's.
	if _, out := sh(t, s, "cat /proc/sys/kernel/random/boot_id"); out == strings.TrimSpace(readFile(t, "/proc/sys/kernel/random/boot_id")) {
		t.Fatal("the sandbox shares the host kernel's boot id")
	}
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fileSum(t *testing.T, p string) [32]byte {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// TestTemplateRestoredTwice restores two sandboxes from one template: each
// has its own state (files, hostname, clock set, entropy), and the
// template's RAM and state files are unchanged by them (copy-on-write).
func TestTemplateRestoredTwice(t *testing.T) {
	b := testBackend(t, false)
	pol := testPolicy(t, workspace(t), false)
	if _, err := b.Prepare(context.Background(), sandbox.Spec{ID: "prep-" + randID(), Policy: pol}); err != nil {
		t.Fatal(err)
	}
	tm := b.Templates()
	if len(tm) != 1 {
		t.Fatalf("templates: %+v", tm)
	}
	t.Logf("template %s: device state %d bytes, made in %d ms", tm[0].Key, tm[0].StateSize, tm[0].BuildMillis)
	memBefore, stateBefore := fileSum(t, tm[0].MemFile), fileSum(t, tm[0].StateFile)
	var boxes []sandbox.Sandbox
	for i := 0; i < 2; i++ {
		s := create(t, b, sandbox.Spec{Policy: testPolicy(t, workspace(t), false)})
		if !s.(*vmSandbox).restored {
			t.Fatal("sandbox was booted, not restored from the template")
		}
		boxes = append(boxes, s)
	}
	for i, s := range boxes {
		if st, out := sh(t, s, "echo sandbox-"+string(rune('a'+i))+" > /tmp/state && head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'"); st.Code != 0 {
			t.Fatalf("%+v %s", st, out)
		} else {
			t.Logf("sandbox %d random bytes %s", i, out)
		}
	}
	var rnd []string
	for i, s := range boxes {
		_, out := sh(t, s, "cat /tmp/state; hostname; date +%s; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'")
		lines := strings.Split(out, "\n")
		if len(lines) != 4 || lines[0] != "sandbox-"+string(rune('a'+i)) || lines[1] != s.ID() {
			t.Fatalf("sandbox %d sees %q", i, out)
		}
		if now := time.Now().Unix(); !strings.HasPrefix(lines[2], "1") || absDiff(atoi(lines[2]), now) > 120 {
			t.Fatalf("sandbox %d clock %s, host %d (not reset after restore)", i, lines[2], now)
		}
		rnd = append(rnd, lines[3])
	}
	if rnd[0] == rnd[1] {
		t.Fatalf("two restored sandboxes read the same random bytes %s (entropy not reseeded)", rnd[0])
	}
	for _, s := range boxes {
		s.Destroy(context.Background())
	}
	if fileSum(t, tm[0].MemFile) != memBefore || fileSum(t, tm[0].StateFile) != stateBefore {
		t.Fatal("restored sandboxes changed the template's files")
	}
	// And the template still serves: a third restore works.
	s := create(t, b, sandbox.Spec{Policy: testPolicy(t, workspace(t), false)})
	if _, out := sh(t, s, "cat /tmp/state 2>&1 || echo none"); !strings.Contains(out, "none") && !strings.Contains(out, "No such file") {
		t.Fatalf("a new sandbox sees an earlier one's /tmp: %q", out)
	}
}

func atoi(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestTimeoutLeavesNothing: a sandbox past its wall timeout is killed, its
// process reports the timeout, and no VMM process, socket, cgroup or
// memory file of it is left.
func TestTimeoutLeavesNothing(t *testing.T) {
	b := testBackend(t, false)
	pol := testPolicy(t, workspace(t), false)
	pol.Limits.Timeout = policy.Duration(4 * time.Second)
	s := create(t, b, sandbox.Spec{Policy: pol})
	pid := s.(*vmSandbox).vm.Pid()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := s.Exec(ctx, sandbox.ExecRequest{Args: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || !st.TimedOut {
		t.Fatalf("status %+v, %v: want timed out", st, err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("sandbox not done after its timeout")
	}
	if _, err := s.Exec(ctx, sandbox.ExecRequest{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) || !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("exec after timeout: %v", err)
	}
	if err := leaks(b, s.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + itoa(pid)); err == nil {
		t.Fatalf("vmm process %d still exists", pid)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestKilledVMMIsNoticed: a VMM killed from outside ends the sandbox.
func TestKilledVMMIsNoticed(t *testing.T) {
	b := testBackend(t, false)
	s := create(t, b, specFor(t))
	if err := syscallKill(s.(*vmSandbox).vm.Pid()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(time.Minute):
		t.Fatal("sandbox not done after its VMM was killed")
	}
	if err := leaks(b, s.ID()); err != nil {
		t.Fatal(err)
	}
}

// TestProtectedWorkspaceWriteBack: with protect_config on, the workspace is
// read-only at the host while the sandbox runs; Sync writes back what the
// guard allows and refuses a planted git hook at depth.
func TestProtectedWorkspaceWriteBack(t *testing.T) {
	b := testBackend(t, false)
	ws := workspace(t)
	for _, d := range []string{".git/hooks", "sub/.git/hooks"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	s := create(t, b, sandbox.Spec{Policy: testPolicy(t, ws, true)})
	st, out := sh(t, s, "echo data > notes.txt && printf '#!/bin/sh\\necho pwned\\n' > sub/.git/hooks/pre-commit && chmod +x sub/.git/hooks/pre-commit && echo '[core]' > .git/config && cat notes.txt")
	if st.Code != 0 || out != "data" {
		t.Fatalf("%+v %q", st, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes.txt")); err == nil {
		t.Fatal("the host workspace was written while the sandbox runs (want the writable layer)")
	}
	rep, err := s.(sandbox.Syncer).Sync(context.Background())
	t.Logf("sync: %+v %v", rep, err)
	if b, err := os.ReadFile(filepath.Join(ws, "notes.txt")); err != nil || string(b) != "data\n" {
		t.Fatalf("notes.txt not written back: %q %v", b, err)
	}
	for _, p := range []string{"sub/.git/hooks/pre-commit", ".git/config"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err == nil {
			t.Fatalf("%s was written back", p)
		}
	}
	if rep.Denied < 2 {
		t.Fatalf("denied %d, want the hook and the git config refused", rep.Denied)
	}
}

// TestCreateFailsClean: a spec the backend cannot honour leaves nothing.
func TestCreateFailsClean(t *testing.T) {
	b := testBackend(t, true)
	pol := testPolicy(t, workspace(t), false)
	pol.Filesystem.ReadWrite = append(pol.Filesystem.ReadWrite, "/nonexistent-airlock-dir")
	id := "bad-" + randID()
	_, err := b.Create(context.Background(), sandbox.Spec{ID: id, Policy: pol})
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
	if err := leaks(b, id); err != nil {
		t.Fatal(err)
	}
}

// TestVMMJail: the QEMU process of a sandbox has no capability, no new
// privileges, a seccomp filter, its own mount, PID, network and user
// namespaces, its own cgroup, a root of its own (its directory, kernel
// and shares, read-only system directories, nothing else: no denied
// host file, no other VM's directory) and is no host user: uid 0 of a
// user namespace mapped onto a leased range.
func TestVMMJail(t *testing.T) {
	b := testBackend(t, false)
	s1 := create(t, b, specFor(t))
	s2 := create(t, b, specFor(t))
	jail := s1.(*vmSandbox).vm.Pid()
	pid := strconv.Itoa(vmmPid(t, jail))
	status := readFile(t, "/proc/"+pid+"/status")
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("qemu %s: no %q in its status", pid, want)
		}
	}
	uid, gid := statusIDs(t, status, "Uid:"), statusIDs(t, status, "Gid:")
	if uid < 1<<16 || gid < 1<<16 {
		t.Errorf("qemu %s runs as host uid %d gid %d, want a leased range's", pid, uid, gid)
	}
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "user"} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns)
		its, err := os.Readlink("/proc/" + pid + "/ns/" + ns)
		if err != nil || its == mine {
			t.Errorf("qemu shares the host's %s namespace (%s, %v)", ns, its, err)
		}
	}
	if cg := readFile(t, "/proc/"+pid+"/cgroup"); !strings.Contains(cg, s1.ID()) {
		t.Errorf("qemu not in its own cgroup: %s", cg)
	}
	if host, err := os.ReadFile("/etc/shadow"); err != nil || len(host) == 0 {
		t.Fatalf("the host's /etc/shadow is empty or unreadable (%v): the check below would prove nothing", err)
	}
	if b, err := os.ReadFile("/proc/" + pid + "/root/etc/shadow"); err == nil && len(b) > 0 {
		t.Errorf("qemu can read /etc/shadow (%d bytes)", len(b))
	}
	for _, other := range []string{filepath.Join(b.vmsDir(), s2.ID()), b.vmsDir(), "/root", "/home"} {
		if _, err := os.Stat("/proc/" + pid + "/root" + other); err == nil {
			t.Errorf("qemu of %s sees %s", s1.ID(), other)
		}
	}
	if _, err := os.Stat("/proc/" + pid + "/root" + viewDir + "/" + qmpSock); err != nil {
		t.Errorf("qemu does not see its own directory: %v", err)
	}
	// The sandbox still works through its idmapped directory and shares.
	if st, out := sh(t, s1, "ls / >/dev/null && echo ok"); strings.TrimSpace(out) != "ok" {
		t.Errorf("exec after the checks: %v %q", st, out)
	}
}

// TestVMMEscapeIsNoHostRoot plays a VMM an escape has taken over: with
// QEMU's host ids and mount namespace, it tries to open a global sysctl
// (kernel.core_pattern: whoever writes it runs a program as host root at
// the next crash) for writing. The kernel grants that to global uid 0 by
// the file's mode alone, without a capability, as the same attempt by
// uid 0 without capabilities on the host shows first; the jailed VMM is
// no host uid 0, and its /proc is read-only besides.
func TestVMMEscapeIsNoHostRoot(t *testing.T) {
	testutil.RequireBinary(t, "setpriv")
	testutil.RequireBinary(t, "nsenter")
	const attack = "exec 3>>/proc/sys/kernel/core_pattern && echo OPENED"
	drop := []string{"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--", "/bin/sh", "-c", attack}
	out, err := exec.Command("setpriv", append([]string{"--reuid=0", "--regid=0"}, drop...)...).CombinedOutput()
	if !strings.Contains(string(out), "OPENED") {
		t.Fatalf("control: uid 0 without capabilities could not open core_pattern for writing (%v: %s): the attack proves nothing", err, out)
	}
	b := testBackend(t, false)
	s := create(t, b, specFor(t))
	pid := vmmPid(t, s.(*vmSandbox).vm.Pid())
	status := readFile(t, "/proc/"+strconv.Itoa(pid)+"/status")
	ids := []string{"--reuid=" + strconv.Itoa(statusIDs(t, status, "Uid:")), "--regid=" + strconv.Itoa(statusIDs(t, status, "Gid:"))}
	args := append([]string{"-t", strconv.Itoa(pid), "-m", "--", "setpriv"}, append(ids, drop...)...)
	out, err = exec.Command("nsenter", args...).CombinedOutput()
	if strings.Contains(string(out), "OPENED") {
		t.Fatalf("the jailed VMM's identity opened kernel.core_pattern for writing: %s", out)
	}
	if !strings.Contains(string(out), "ermission denied") && !strings.Contains(string(out), "ead-only") {
		t.Errorf("the attempt failed for another reason than permission (%v): %s", err, out)
	}
}

// vmmPid is the VMM's pid: the jail's only child.
func vmmPid(t *testing.T, jail int) int {
	t.Helper()
	kids := strings.Fields(readFile(t, fmt.Sprintf("/proc/%d/task/%d/children", jail, jail)))
	if len(kids) != 1 {
		t.Fatalf("jail %d has children %v, want the VMM alone", jail, kids)
	}
	pid, _ := strconv.Atoi(kids[0])
	return pid
}

// statusIDs is the real id on a /proc/PID/status line (Uid: or Gid:).
func statusIDs(t *testing.T, status, key string) int {
	t.Helper()
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("no %s in status", key)
	return 0
}

// TestImageRoot: a root filesystem directory (the policy's rootfs) is the
// sandbox's root, read-only, with
// the workspace shared as usual; the host's system directories are not
// there, and nothing is written into the image on the host.
func TestImageRoot(t *testing.T) {
	bb := testutil.RequireBinary(t, "busybox")
	b := testBackend(t, false)
	img := t.TempDir()
	for _, d := range []string{"bin", "etc", "tmp", "proc", "dev"} {
		os.Mkdir(filepath.Join(img, d), 0o755)
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(img, "bin", "busybox"), data, 0o755)
	for _, l := range []string{"sh", "cat", "ls", "echo"} {
		os.Symlink("busybox", filepath.Join(img, "bin", l))
	}
	os.WriteFile(filepath.Join(img, "etc", "image-marker"), []byte("from the image"), 0o644)
	ws := workspace(t)
	pol := testPolicy(t, ws, false)
	pol.Filesystem.ReadOnly = nil // the image is the whole root
	pol.Filesystem.Rootfs = img
	pol.Process.Env["PATH"] = "/bin"
	s := create(t, b, sandbox.Spec{Policy: pol})
	st, out := sh(t, s, "cat /etc/image-marker; echo; ls /usr 2>&1; { echo x > /etc/new; } 2>/dev/null || echo refused; echo w > "+ws+"/w.txt && echo ok")
	if st.Code != 0 || !strings.Contains(out, "from the image") || !strings.Contains(out, "refused") || !strings.HasSuffix(out, "ok") {
		t.Fatalf("%+v %q", st, out)
	}
	if strings.Contains(out, "bin\n") || !strings.Contains(out, "No such file") {
		t.Fatalf("the host's /usr is visible: %q", out)
	}
	if _, err := os.Stat(filepath.Join(img, "etc", "new")); err == nil {
		t.Fatal("a write reached the image on the host")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "w.txt")); err != nil || string(b) != "w\n" {
		t.Fatalf("workspace write: %q %v", b, err)
	}
}

// TestStoreImage: an image of the image store (its unpacked layers,
// Spec.Root) is the VM's root, each layer a read-only share overlaid in
// the guest: the image's files, env and working directory, the workspace
// at /workspace, writes in the guest's layer only.
func TestStoreImage(t *testing.T) {
	b := testBackend(t, false)
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := policy.Profile("default")
	r := imagestest.BusyboxRoot(t)
	spec := imagestest.Spec(t, r, p, ws)
	s := create(t, b, spec)
	st, out := sh(t, s, "pwd; cat hello.txt; echo; echo $IMAGE_VAR; cat /etc/hostname; echo new > /etc/motd && cat /etc/motd; test -e /etc/debian_version && echo host || echo image")
	if want := "/workspace\nfrom the host\nfrom-image\nbusybox\nnew\nimage"; st.Code != 0 || out != want {
		t.Errorf("inside the image VM: %+v %q, want %q", st, out, want)
	}
	if _, err := os.Stat(filepath.Join(r.Layers[len(r.Layers)-1], "etc", "motd")); err == nil {
		t.Error("a write reached the image's layer on the host")
	}
	// A name without its layers is refused before anything starts.
	bad := spec
	bad.ID, bad.Root = randID(), nil
	if _, err := b.Create(context.Background(), bad); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("image name without layers: %v, want ErrInvalid", err)
	}
}
