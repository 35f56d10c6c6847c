package ocirt

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// dockerd is a Docker daemon of the test's own: its own data root, exec
// root (and so its own containerd, shims and runtime state), pid file,
// socket, config file (the host's /etc/docker/daemon.json is not read)
// and cgroup parent; no bridge, no iptables. A shared daemon on the
// machine is never touched.
type dockerd struct {
	dir, sock string
	docker    string
	cmd       *exec.Cmd
	done      chan struct{}
}

func startDockerd(t *testing.T) *dockerd {
	t.Helper()
	testutil.RequireRoot(t)
	bin := testutil.RequireBinary(t, "dockerd")
	docker := testutil.RequireBinary(t, "docker")
	testutil.RequireBinary(t, "containerd")
	dir, err := os.MkdirTemp("", "al-dockerd-")
	must(t, err)
	d := &dockerd{dir: dir, sock: filepath.Join(dir, "d.sock"), docker: docker, done: make(chan struct{})}
	link := runtimeLink(t, dir)
	op := operatorConfig(t, dir)
	cfg := filepath.Join(dir, "daemon.json")
	must(t, os.WriteFile(cfg, []byte("{}\n"), 0o644))
	logf, err := os.Create(filepath.Join(dir, "dockerd.log"))
	must(t, err)
	d.cmd = exec.Command(bin,
		"--config-file", cfg, "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"), "-H", "unix://"+d.sock,
		"--bridge=none", "--iptables=false", "--ip-masq=false", "--userland-proxy=false",
		"--cgroup-parent", "/airlock-oci-docker-"+filepath.Base(dir), "--storage-driver", "overlay2",
		"--add-runtime", "airlock="+link)
	d.cmd.Env = append(os.Environ(), "AIRLOCK_OCI_CONFIG="+op)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, d.cmd.Start())
	go func() { _ = d.cmd.Wait(); logf.Close(); close(d.done) }()
	t.Cleanup(func() { d.stop(t) })
	waitUp(t, "dockerd", d.done, 60*time.Second, func() error { _, err := d.run("version"); return err }, d.log)
	if out, err := d.run("load", "-i", buildImage(t, dir)); err != nil {
		t.Fatalf("docker load: %v: %s", err, out)
	}
	return d
}

func (d *dockerd) log() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "dockerd.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

func (d *dockerd) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.docker, append([]string{"-H", "unix://" + d.sock}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func (d *dockerd) stop(t *testing.T) {
	if ids, err := d.run("ps", "-aq"); err == nil && ids != "" {
		_, _ = d.run(append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	}
	_ = exec.Command("sh", "-c", "grep -o ' "+d.dir+"[^ ]*' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l").Run()
	if err := os.RemoveAll(d.dir); err != nil {
		t.Logf("remove %s: %v", d.dir, err)
	}
}

// TestDockerRunRuntimeAirlock: `docker run --runtime=airlock` against a
// dockerd started with --add-runtime airlock=.../airlock-runc: output,
// exit codes, a missing command, exec into a running container, stop and
// remove, with Airlock's confinement (and Docker's own seccomp profile
// stacked on the floor) visible from inside.
func TestDockerRunRuntimeAirlock(t *testing.T) {
	d := startDockerd(t)
	// airlock doctor sees the registration and that it is this binary.
	doc, err := exec.Command(testutil.AirlockBinary(t), "doctor", "--json", "--docker-host", "unix://"+d.sock).Output()
	if err != nil {
		t.Fatalf("airlock doctor: %v", err)
	}
	var rep struct {
		OCIRuntimes []struct {
			Registered bool `json:"registered"`
			ThisBinary bool `json:"this_binary"`
			Problem    string
		} `json:"oci_runtimes"`
	}
	if err := json.Unmarshal(doc, &rep); err != nil || len(rep.OCIRuntimes) != 1 || !rep.OCIRuntimes[0].Registered || !rep.OCIRuntimes[0].ThisBinary {
		t.Errorf("airlock doctor on a daemon with --add-runtime airlock: %v %s", err, doc)
	}
	out, err := d.run("run", "--rm", "--runtime=airlock", "--network", "none", testImage,
		"sh", "-c", "echo hello-airlock; grep -E '^(NoNewPrivs|Seccomp_filters|CapBnd)' /proc/self/status")
	if err != nil {
		t.Fatalf("docker run: %v: %s\n%s", err, out, d.log())
	}
	if !strings.Contains(out, "hello-airlock") || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Fatalf("docker run --runtime=airlock: not confined by Airlock:\n%s", out)
	}
	// Docker's default profile and Airlock's floor, stacked.
	if !strings.Contains(out, "Seccomp_filters:\t2") {
		t.Errorf("want Docker's seccomp profile stacked on Airlock's floor (2 filters):\n%s", out)
	}
	if bnd := field(out, "CapBnd"); bnd == "" || mustHex(t, bnd)&(1<<27|1<<13) != 0 {
		t.Errorf("CAP_MKNOD or CAP_NET_RAW in the bounding set %s: above the ceiling", bnd)
	}
	// The same through runc, for contrast: no no_new_privs.
	if out, err := d.run("run", "--rm", "--network", "none", testImage, "grep", "NoNewPrivs", "/proc/self/status"); err != nil || !strings.Contains(out, "NoNewPrivs:\t0") {
		t.Errorf("runc baseline: %v %s", err, out)
	}

	// Exit codes pass through; a missing command is Docker's 127.
	_, err = d.run("run", "--rm", "--runtime=airlock", "--network", "none", testImage, "sh", "-c", "exit 7")
	if code := exitCode(err); code != 7 {
		t.Errorf("exit 7: got %d (%v)", code, err)
	}
	out, err = d.run("run", "--rm", "--runtime=airlock", "--network", "none", testImage, "no-such-command")
	if code := exitCode(err); code != 127 || !strings.Contains(out, "executable file not found") {
		t.Errorf("missing command: exit %d, %q; want 127 and docker's message", code, out)
	}

	// A long-running container: exec, logs, stop, rm.
	id, err := d.run("run", "-d", "--runtime=airlock", "--network", "none", testImage, "sh", "-c", podCommand)
	if err != nil {
		t.Fatalf("docker run -d: %v: %s", err, id)
	}
	if out, err := d.run("exec", id, "sh", "-c", "echo exec-ok; cat /proc/self/status | grep NoNewPrivs"); err != nil ||
		!strings.Contains(out, "exec-ok") || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Errorf("docker exec: %v: %s", err, out)
	}
	if out, err := d.run("exec", id, "sh", "-c", "mknod /tmp/m c 1 1 && echo DONE"); strings.Contains(out, "DONE") {
		t.Errorf("mknod worked through docker exec: %v %s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := d.run("logs", id)
		if strings.Contains(out, "log-line") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker logs: %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := d.run("stop", "-t", "5", id); err != nil {
		t.Fatalf("docker stop: %v: %s", err, out)
	}
	if out, _ := d.run("inspect", "-f", "{{.State.ExitCode}}", id); out != "0" {
		t.Errorf("after stop: exit code %s, want 0 (the TERM trap ran)", out)
	}
	if out, err := d.run("rm", id); err != nil {
		t.Fatalf("docker rm: %v: %s", err, out)
	}
	ents, _ := os.ReadDir(filepath.Join(d.dir, "exec", "runtime-airlock", "moby"))
	if len(ents) != 0 {
		t.Errorf("runtime state left behind: %v", ents)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// A terminal: the runtime makes a pty in the container's devpts and hands
// its master to the shim over the console socket.
func TestDockerRunTerminal(t *testing.T) {
	d := startDockerd(t)
	out, err := d.run("run", "--rm", "-t", "--runtime=airlock", "--network", "none", testImage, "sh", "-c", "tty; test -t 0 && echo stdin-is-a-tty")
	if err != nil || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "stdin-is-a-tty") {
		t.Fatalf("docker run -t: %v: %q\n%s", err, out, d.log())
	}
	id, err := d.run("run", "-d", "--runtime=airlock", "--network", "none", testImage, "sh", "-c", podCommand)
	if err != nil {
		t.Fatalf("docker run -d: %v %s", err, id)
	}
	if out, err := d.run("exec", "-t", id, "sh", "-c", "tty"); err != nil || !strings.Contains(out, "/dev/pts/") {
		t.Errorf("docker exec -t: %v %q", err, out)
	}
}
