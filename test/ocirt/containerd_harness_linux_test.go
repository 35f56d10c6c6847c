package ocirt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/testutil/ocitest"
)

// ctrd is a containerd of the test's own: its own root, state, sockets,
// opt dir and CNI config (a loopback-only network: pods get their own
// network namespace and nothing on the host changes), with two runtime
// handlers on the runc shim: runc, and airlock (BinaryName = airlock-runc).
type ctrd struct {
	dir, sock string
	crictlBin string
	cmd       *exec.Cmd
	done      chan struct{}
	runtime   string // the airlock-runc link
	opConfig  string // the operator config the airlock runtime reads
}

// runtimeLink makes dir/airlock-runc, the name the runtime answers to.
func runtimeLink(t testing.TB, dir string) string {
	t.Helper()
	bin := testutil.AirlockBinary(t)
	link := filepath.Join(dir, "bin", "airlock-runc")
	must(t, os.MkdirAll(filepath.Dir(link), 0o755))
	must(t, os.Symlink(bin, link))
	return link
}

// operatorConfig writes the runtime's operator ceiling (ocitest's: the
// default profile, with a policy allowing the pod network for the tests
// that need it).
func operatorConfig(t testing.TB, dir string) string {
	t.Helper()
	cfg, err := ocitest.OperatorConfig(dir)
	must(t, err)
	return cfg
}

// testCNIPlugin is the pods' network: a CNI plugin that gives the pod's
// own network namespace an eth0 (a veth pair, both ends inside it) with a documentation address, and
// touches nothing outside it (no bridge, no veth, no iptables on the
// host). Debian's loopback plugin brings lo up.
const testCNIPlugin = `#!/bin/sh
set -e
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
ADD)
	nsenter --net="$CNI_NETNS" ip link add "$CNI_IFNAME" type veth peer name airlock-peer
	nsenter --net="$CNI_NETNS" ip addr add 192.0.2.2/32 dev "$CNI_IFNAME"
	nsenter --net="$CNI_NETNS" ip link set "$CNI_IFNAME" up
	echo '{"cniVersion":"1.0.0","interfaces":[{"name":"'"$CNI_IFNAME"'","sandbox":"'"$CNI_NETNS"'"}],"ips":[{"address":"192.0.2.2/32","interface":0}]}' ;;
*) exit 0 ;;
esac
`

func startContainerd(t testing.TB) *ctrd {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "containerd")
	testutil.RequireBinary(t, "containerd-shim-runc-v2")
	testutil.RequireBinary(t, "runc")
	crictl := filepath.Join(build.Default.GOPATH, "bin", "crictl") // where deps.sh installs it
	if _, err := os.Stat(crictl); err != nil {
		crictl = testutil.RequireBinary(t, "crictl")
	}
	if _, err := os.Stat("/usr/lib/cni/loopback"); err != nil {
		testutil.Skip(t, "CNI plugins not installed (containernetworking-plugins)")
	}
	// Short paths: unix socket names are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "al-ctrd-")
	must(t, err)
	c := &ctrd{dir: dir, sock: filepath.Join(dir, "c.sock"), crictlBin: crictl, done: make(chan struct{})}
	c.runtime = runtimeLink(t, dir)
	c.opConfig = operatorConfig(t, dir)
	cni, cniBin := filepath.Join(dir, "cni"), filepath.Join(dir, "cni-bin")
	must(t, os.MkdirAll(cni, 0o755))
	must(t, os.MkdirAll(cniBin, 0o755))
	must(t, os.Symlink("/usr/lib/cni/loopback", filepath.Join(cniBin, "loopback")))
	must(t, os.WriteFile(filepath.Join(cniBin, "airlock-test-net"), []byte(testCNIPlugin), 0o755))
	must(t, os.WriteFile(filepath.Join(cni, "10-test.conflist"),
		[]byte(`{"cniVersion":"1.0.0","name":"airlock-test","plugins":[{"type":"airlock-test-net"}]}`), 0o644))
	// The airlock handler is the snippet deploy/kubernetes ships, with
	// this test's binary and a private state root.
	conf, err := ocitest.Containerd{
		Dir: dir, Socket: c.sock, SandboxImage: testImage, CNIConfDir: cni, CNIBinDir: cniBin,
		Runtime: c.runtime, Snippet: "../../deploy/kubernetes/containerd-airlock.toml",
	}.Config()
	must(t, err)
	cfg := filepath.Join(dir, "containerd.toml")
	must(t, os.WriteFile(cfg, []byte(conf), 0o644))
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	must(t, err)
	c.cmd = exec.Command("containerd", "--config", cfg)
	c.cmd.Env = append(os.Environ(), "AIRLOCK_OCI_CONFIG="+c.opConfig)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(t, c.cmd.Start())
	go func() { _ = c.cmd.Wait(); logf.Close(); close(c.done) }()
	t.Cleanup(func() { c.stop(t) })
	waitUp(t, "containerd", c.done, 30*time.Second, func() error { _, err := c.crictlOut("version"); return err }, c.log)
	img := buildImage(t, dir)
	if out, err := exec.Command("ctr", "-a", c.sock, "-n", "k8s.io", "images", "import", img).CombinedOutput(); err != nil {
		t.Fatalf("import test image: %v\n%s", err, out)
	}
	return c
}

// waitUp waits until probe succeeds, failing when the daemon exits or
// the timeout passes.
func waitUp(t testing.TB, what string, done <-chan struct{}, timeout time.Duration, probe func() error, log func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for probe() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come up:\n%s", what, log())
		}
		select {
		case <-done:
			t.Fatalf("%s exited:\n%s", what, log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *ctrd) log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "containerd.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// stop removes every pod (so no shim, container or netns is left), stops
// containerd and removes its directories.
func (c *ctrd) stop(t testing.TB) {
	if out, err := c.crictlOut("pods", "-q"); err == nil {
		for _, p := range strings.Fields(out) {
			_, _ = c.crictlOut("stopp", p)
			_, _ = c.crictlOut("rmp", "-f", p)
		}
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
	// Unmount what containerd left (snapshots, shm), then remove.
	_ = exec.Command("sh", "-c", "grep -o ' "+c.dir+"[^ ]*' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l").Run()
	if err := os.RemoveAll(c.dir); err != nil {
		t.Logf("remove %s: %v", c.dir, err)
	}
}

func (c *ctrd) crictlOut(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.crictlBin, append([]string{"--runtime-endpoint", "unix://" + c.sock, "--image-endpoint", "unix://" + c.sock, "--timeout", "50s"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("crictl %s: %v: %s%s", strings.Join(args, " "), err, errb.String(), out.String())
	}
	return out.String(), nil
}

func (c *ctrd) crictl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.crictlOut(args...)
	if err != nil {
		t.Fatalf("%v\ncontainerd log:\n%s", err, c.log())
	}
	return strings.TrimSpace(out)
}

// writeJSON writes v to dir/name and returns the path.
func writeJSON(t testing.TB, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	p := filepath.Join(dir, name)
	must(t, os.WriteFile(p, b, 0o644))
	return p
}

var podSeq int

// podConfig is a CRI pod sandbox config with its own name.
func (c *ctrd) podConfig(t testing.TB, annotations map[string]string) string {
	podSeq++
	name := fmt.Sprintf("pod%d", podSeq)
	return writeJSON(t, c.dir, name+".json", map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": "airlock-test", "uid": fmt.Sprintf("uid-%d", podSeq), "attempt": 1},
		"log_directory": filepath.Join(c.dir, "logs", name),
		"annotations":   annotations,
		"linux":         map[string]any{},
	})
}

func (c *ctrd) containerConfig(t testing.TB, name string, args []string, annotations map[string]string) string {
	return writeJSON(t, c.dir, name+".json", map[string]any{
		"metadata":    map[string]any{"name": name},
		"image":       map[string]any{"image": testImage},
		"command":     args,
		"log_path":    name + ".log",
		"annotations": annotations,
		// As the kubelet asks (without shareProcessNamespace): a pid
		// namespace of the container's own; ipc and network are the pod's.
		"linux": map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"pid": 1}}},
	})
}
