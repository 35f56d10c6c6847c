package oci

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// The runtime's CLI as containerd's shim and dockerd call it, on a bundle
// made here from Debian's static busybox. The test process is a child
// subreaper, as the shim is: containers must become its children.

type rt struct {
	t      *testing.T
	bin    string // .../airlock-runc
	root   string
	bundle string
	env    []string
}

func newRT(t *testing.T) *rt {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		testutil.Skip(t, "busybox-static not installed")
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "airlock-runc")
	if err := os.Symlink(testutil.AirlockBinary(t), link); err != nil {
		t.Fatal(err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	r := &rt{t: t, bin: link, root: filepath.Join(dir, "state"), bundle: filepath.Join(dir, "bundle")}
	rootfs := filepath.Join(r.bundle, "rootfs")
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp", "etc", "data"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin/busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "cat", "echo", "sleep", "grep", "mknod", "mount", "touch", "mkdir", "ls", "chmod"} {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	op := filepath.Join(dir, "oci.yaml")
	if err := os.WriteFile(op, []byte("profile: default\nprofiles: [default, strict]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.env = append(os.Environ(), OperatorConfigEnv+"="+op)
	t.Cleanup(func() {
		ents, _ := os.ReadDir(r.root)
		for _, e := range ents {
			r.run("delete", "--force", e.Name())
		}
	})
	return r
}

// spec is a minimal config.json for the bundle's rootfs.
func (r *rt) spec(args ...string) *specs.Spec {
	return &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: "rootfs"},
		Hostname: "airlock-test",
		Process: &specs.Process{Args: args, Cwd: "/", Env: []string{"PATH=/bin"},
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  []string{"CAP_CHOWN", "CAP_KILL", "CAP_MKNOD", "CAP_SYS_ADMIN", "CAP_NET_RAW"},
				Effective: []string{"CAP_CHOWN", "CAP_KILL", "CAP_MKNOD", "CAP_SYS_ADMIN", "CAP_NET_RAW"},
				Permitted: []string{"CAP_CHOWN", "CAP_KILL", "CAP_MKNOD", "CAP_SYS_ADMIN", "CAP_NET_RAW"},
			}},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: "pid"}, {Type: "network"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}}},
	}
}

func (r *rt) write(s *specs.Spec) {
	b, err := json.Marshal(s)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.bundle, "config.json"), b, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// run calls the runtime as the shim does (global flags first) and returns
// stdout+stderr and the exit code.
func (r *rt) run(args ...string) (string, int) {
	cmd := exec.Command(r.bin, append([]string{"--root", r.root, "--log", filepath.Join(r.root, "..", "log.json"), "--log-format", "json"}, args...)...)
	cmd.Env = r.env
	// A file, not a pipe: a container keeps the stdio it inherits open.
	f, err := os.CreateTemp(r.t.TempDir(), "out")
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	out, _ := os.ReadFile(f.Name())
	return strings.TrimSpace(string(out)), code
}

func (r *rt) must(args ...string) string {
	r.t.Helper()
	out, code := r.run(args...)
	if code != 0 {
		r.t.Fatalf("%v: exit %d: %s", args, code, out)
	}
	return out
}

func (r *rt) state(id string) map[string]any {
	r.t.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(r.must("state", id)), &st); err != nil {
		r.t.Fatal(err)
	}
	return st
}

func TestLifecycleAsTheShimCallsIt(t *testing.T) {
	r := newRT(t)
	c1 := uniqueID("c1")
	r.write(r.spec("sh", "-c", "trap 'exit 3' TERM; echo ready > /tmp/ready; while :; do sleep 1; done"))
	pidFile := filepath.Join(r.bundle, "init.pid")
	r.must("create", "--bundle", r.bundle, "--pid-file", pidFile, c1)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	if st := r.state(c1); st["status"] != "created" || int(st["pid"].(float64)) != pid || st["bundle"] != r.bundle {
		t.Fatalf("after create: %v (pid file %d)", st, pid)
	}
	if ppid := parentPid(t, pid); ppid != os.Getpid() {
		t.Errorf("container pid %d has parent %d, want the caller's subreaper %d", pid, ppid, os.Getpid())
	}
	if out, code := r.run("start", c1); code != 0 {
		t.Fatalf("start: %s", out)
	}
	if st := r.state(c1); st["status"] != "running" {
		t.Fatalf("after start: %v", st)
	}
	if out, code := r.run("start", c1); code == 0 || !strings.Contains(out, "cannot start an already running container") {
		t.Errorf("second start: %d %s", code, out)
	}
	// exec as containerd does it: a process file, detached, a pid file.
	proc := filepath.Join(r.bundle, "proc.json")
	pb, _ := json.Marshal(specs.Process{Args: []string{"sh", "-c", "grep -E '^(NoNewPrivs|Seccomp|CapBnd)' /proc/self/status > /tmp/exec.out; hostname >> /tmp/exec.out"},
		Cwd: "/", Env: []string{"PATH=/bin"}, Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_SYS_ADMIN", "CAP_CHOWN"}}})
	if err := os.WriteFile(proc, pb, 0o644); err != nil {
		t.Fatal(err)
	}
	execPid := filepath.Join(r.bundle, "exec.pid")
	r.must("exec", "--process", proc, "--detach", "--pid-file", execPid, c1)
	b, _ = os.ReadFile(execPid)
	epid, _ := strconv.Atoi(string(b))
	var ws unix.WaitStatus
	if _, err := unix.Wait4(epid, &ws, 0, nil); err != nil {
		t.Fatalf("exec'd process %d is not the caller's child: %v", epid, err)
	}
	out := readIn(t, pid, "/tmp/exec.out")
	for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2", "airlock-test"} {
		if !strings.Contains(out, want) {
			t.Errorf("exec'd process: want %q in\n%s", want, out)
		}
	}
	if bnd := strings.TrimSpace(strings.TrimPrefix(grepLine(out, "CapBnd"), "CapBnd:")); bnd != "0000000000000001" {
		t.Errorf("exec'd process bounding set %s: want CAP_CHOWN only (CAP_SYS_ADMIN is above the ceiling)", bnd)
	}
	if out := r.must("ps", "--format", "json", c1); !strings.Contains(out, strconv.Itoa(pid)) {
		t.Errorf("ps: %s", out)
	}
	out, code := r.run("delete", c1)
	if code == 0 || !strings.Contains(out, "cannot delete container "+c1+" that is not stopped: running") {
		t.Errorf("delete of a running container: %d %s", code, out)
	}
	r.must("kill", c1, "15")
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 3 {
		t.Errorf("container exit: %v status %d, want 3 (its TERM trap)", err, ws.ExitStatus())
	}
	if st := r.state(c1); st["status"] != "stopped" || st["pid"].(float64) != 0 {
		t.Errorf("after exit: %v", st)
	}
	// runc's wording on a dead container, which the shim treats as benign.
	if out, code := r.run("kill", c1, "9"); code == 0 || !strings.Contains(out, "container not running") {
		t.Errorf("kill of a stopped container: %d %s", code, out)
	}
	r.must("kill", "--all", c1, "9")
	if log, _ := os.ReadFile(filepath.Join(r.root, "..", "log.json")); !strings.Contains(string(log), `"level":"error","msg":"container not running`) {
		t.Errorf("--log json lacks the error: %s", log)
	}
	r.must("delete", c1)
	if out, code := r.run("delete", c1); code == 0 || !strings.Contains(out, "container does not exist") {
		t.Errorf("delete of a missing container: %d %s", code, out)
	}
	r.must("delete", "--force", c1)
	if out, code := r.run("state", c1); code == 0 || !strings.Contains(out, "does not exist") {
		t.Errorf("state of a deleted container: %s", out)
	}
	if _, err := os.Stat("/sys/fs/cgroup/unified/airlock-oci/" + c1); err == nil {
		t.Error("cgroup left behind")
	}
}

// A create that fails leaves nothing behind and says why, as runc would.
func TestFailedCreateLeavesNothing(t *testing.T) {
	r := newRT(t)
	bad := uniqueID("bad")
	for _, c := range []struct {
		name   string
		mutate func(*specs.Spec)
		want   string
	}{
		{"missing command", func(s *specs.Spec) { s.Process.Args = []string{"no-such-command"} }, "executable file not found"},
		{"unknown capability", func(s *specs.Spec) { s.Process.Capabilities.Bounding = []string{"CAP_FLY"} }, "unknown capability"},
		{"host pid namespace", func(s *specs.Spec) { s.Linux.Namespaces = s.Linux.Namespaces[1:] }, "host's pid namespace"},
		{"user namespace", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
		}, "user namespaces"},
		{"host device", func(s *specs.Spec) { s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/sda", Type: "b", Major: 8}} }, "/dev/sda"},
		{"bind of the docker socket", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/run/x", Type: "bind", Source: "/proc/self", Options: []string{"rbind"}})
		}, "never given to a container"},
		{"host sysctl", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"kernel.panic": "0"} }, "not namespaced"},
		{"profile the operator does not allow", func(s *specs.Spec) { s.Annotations = map[string]string{AnnotationProfile: "coding-agent"} }, "not allowed by the operator"},
		{"policy file by path", func(s *specs.Spec) { s.Annotations = map[string]string{AnnotationPolicy: "/etc/passwd"} }, "not one the operator allows"},
	} {
		s := r.spec("sleep", "1")
		c.mutate(s)
		r.write(s)
		out, code := r.run("create", "--bundle", r.bundle, bad)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d %q, want an error containing %q", c.name, code, out, c.want)
		}
		if ents, _ := os.ReadDir(r.root); len(ents) != 0 {
			t.Errorf("%s: state left behind: %v", c.name, ents)
		}
		if _, err := os.Stat("/sys/fs/cgroup/unified/airlock-oci/" + bad); err == nil {
			t.Errorf("%s: cgroup left behind", c.name)
		}
	}
}

// Writes to a host-backed writable mount go through the write mediator:
// protected configuration is refused at any depth, set-id bits too, and
// ordinary files land.
func TestHostMountIsMediated(t *testing.T) {
	r := newRT(t)
	m1 := uniqueID("m1")
	host := t.TempDir()
	s := r.spec("sleep", "30")
	s.Mounts = append(s.Mounts, specs.Mount{Destination: "/data", Type: "bind", Source: host, Options: []string{"rbind", "rw"}})
	r.write(s)
	r.must("create", "--bundle", r.bundle, m1)
	r.must("start", m1)
	out, _ := r.run("exec", m1, "sh", "-c", "echo ok > /data/file; mkdir -p /data/a/b/.git; echo x > /data/a/b/.git/config; echo rc=$?; echo y > /data/.envrc; echo rc=$?; chmod u+s /data/file; echo rc=$?")
	if strings.Count(out, "rc=0") != 0 {
		t.Errorf("a protected write or a set-id bit went through:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "file")); string(b) != "ok\n" {
		t.Errorf("ordinary write did not land: %q", b)
	}
	for _, p := range []string{"a/b/.git/config", ".envrc"} {
		if _, err := os.Stat(filepath.Join(host, p)); err == nil {
			t.Errorf("%s was written on the host", p)
		}
	}
	if fi, err := os.Stat(filepath.Join(host, "file")); err == nil && fi.Mode()&os.ModeSetuid != 0 {
		t.Error("set-uid bit on a host file")
	}
	audit, _ := os.ReadFile(filepath.Join(r.root, m1, "audit.jsonl"))
	if !strings.Contains(string(audit), `"rule":"git-config"`) {
		t.Errorf("no audit event for the refusal: %s", audit)
	}
	r.must("kill", m1, "9") // delete --force waits until it is gone
	r.must("delete", "--force", m1)
}

func TestFeaturesAndVersion(t *testing.T) {
	r := newRT(t)
	if out := r.must("--version"); !strings.HasPrefix(out, "runc version ") || !strings.Contains(out, "spec: "+specs.Version) {
		t.Errorf("--version: %s", out)
	}
	var f map[string]any
	if err := json.Unmarshal([]byte(r.must("features")), &f); err != nil || f["ociVersionMax"] != specs.Version {
		t.Errorf("features: %v %v", f, err)
	}
	if out, code := r.run("update", "--resources=-", "x"); code == 0 || !strings.Contains(out, "not supported") {
		t.Errorf("update: %d %s", code, out)
	}
	if out, code := r.run("--systemd-cgroup", "create", "x"); code == 0 || !strings.Contains(out, "SystemdCgroup = false") {
		t.Errorf("--systemd-cgroup: %d %s", code, out)
	}
}

func parentPid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	n, _ := strconv.Atoi(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[1])
	return n
}

// readIn reads a file in the container's filesystem through its root.
func readIn(t *testing.T, pid int, p string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/root" + p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// uniqueID keeps tests of other checkouts running at once on this host
// out of each other's cgroups.
func uniqueID(name string) string { return name + "-" + strconv.Itoa(os.Getpid()) }

// TestHostMountNonRootUser: a container running as a non-root uid
// writes a world-writable host mount (a Kubernetes emptyDir is 0777,
// owned by root) through the mediator as any process of that uid would,
// its files owned by it; a root-only directory beside it stays refused.
func TestHostMountNonRootUser(t *testing.T) {
	r := newRT(t)
	id := uniqueID("nr")
	host := t.TempDir()
	if err := os.Chmod(host, 0o777); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(host, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	// An execute-only copy of busybox: what runs from it is not
	// dumpable (as the agent makes itself), so the mediator must reach
	// its descriptors and memory as a tracer would.
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.bundle, "rootfs/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.bundle, "rootfs/x/busybox"), bb, 0o711); err != nil {
		t.Fatal(err)
	}
	s := r.spec("sh", "-c", "id -u > /data/uid; echo rc=$? > /data/log; /x/busybox mkdir /data/d; echo rc=$? >> /data/log; "+
		"/x/busybox touch /data/private/x; echo priv=$? >> /data/log; /x/busybox sh -c 'cd /data && /x/busybox touch rel'; echo rc=$? >> /data/log; /x/openat2 data/dirfd nodump >> /data/log 2>&1; echo rc=$? >> /data/log; sleep 30")
	// And a static C program that opens relative to a directory
	// descriptor (openat2 RESOLVE_IN_ROOT, as the agent's file API does)
	// after marking itself non-dumpable.
	if err := os.WriteFile(filepath.Join(r.bundle, "rootfs/x/openat2"), openat2Probe(t), 0o755); err != nil {
		t.Fatal(err)
	}
	s.Process.User = specs.User{UID: 100000, GID: 100000}
	s.Mounts = append(s.Mounts, specs.Mount{Destination: "/data", Type: "bind", Source: host, Options: []string{"rbind", "rw"}})
	r.write(s)
	r.must("create", "--bundle", r.bundle, id)
	r.must("start", id)
	defer func() {
		r.must("kill", id, "9") // delete --force waits until it is gone
		r.must("delete", "--force", id)
	}()
	var log []byte
	for i := 0; i < 100; i++ {
		if log, _ = os.ReadFile(filepath.Join(host, "log")); strings.Count(string(log), "rc=") == 4 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if uid, _ := os.ReadFile(filepath.Join(host, "uid")); strings.TrimSpace(string(uid)) != "100000" {
		t.Fatalf("the container runs as %q, want 100000 (log %q)", uid, log)
	}
	if strings.Count(string(log), "rc=0") != 4 {
		t.Errorf("a non-root container could not write its world-writable mount:\n%s", log)
	}
	for _, p := range []string{"uid", "d", "rel", "dirfd"} {
		if fi, err := os.Stat(filepath.Join(host, p)); err != nil {
			t.Errorf("%s did not land: %v", p, err)
		} else if st := fi.Sys().(*syscall.Stat_t); st.Uid != 100000 {
			t.Errorf("%s is owned by %d, want the container's uid 100000", p, st.Uid)
		}
	}
	if !strings.Contains(string(log), "priv=1") {
		t.Errorf("a non-root container wrote a root-only directory:\n%s", log)
	}
}

// openat2Probe is a static program (gcc -static) that marks itself
// non-dumpable when given a second argument, then creates argv[1]
// relative to a descriptor of "/" with openat2(RESOLVE_IN_ROOT).
func openat2Probe(t *testing.T) []byte {
	t.Helper()
	cc := testutil.RequireBinary(t, "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "openat2.c")
	if err := os.WriteFile(src, []byte(openat2C), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-static", "-O1", "-o", filepath.Join(dir, "openat2"), src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static: %v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "openat2"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const openat2C = `#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
	if (argc > 2) prctl(PR_SET_DUMPABLE, 0);
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct open_how how = {.flags = O_WRONLY | O_CREAT | O_CLOEXEC, .mode = 0644, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	long fd = syscall(SYS_openat2, root, argv[1], &how, sizeof how);
	if (fd < 0) {
		printf("openat2 %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	return 0;
}
`
