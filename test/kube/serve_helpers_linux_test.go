package kube

import (
	"context"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// kubeServe is one `airlock serve --backend kubernetes` (the real binary)
// on the harness's cluster.
type kubeServe struct {
	socket, data, log string
	cmd               *exec.Cmd
}

// startKubeServe starts airlock serve on the cluster with extra flags and
// waits until it answers; it is stopped when the test ends.
func startKubeServe(t testing.TB, c *kubecluster.Cluster, extra ...string) *kubeServe {
	t.Helper()
	// The plain airlock forwards serve --backend kubernetes to the
	// airlock-kube build beside it (and is the nodes' agent).
	testutil.AirlockKubeBinary(t)
	bin := testutil.AirlockBinary(t)
	// serve wants its data directory reachable by the ids sandboxes run
	// as (it does not know they are on a cluster): not t.TempDir (0700).
	dir, err := os.MkdirTemp("", "airlock-kube-serve-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	s := &kubeServe{socket: filepath.Join(dir, "airlock.sock"), data: filepath.Join(dir, "data"), log: filepath.Join(dir, "serve.log")}
	args := append([]string{"serve", "--socket", s.socket, "--data", s.data, "--log-level", "debug",
		"--backend", "kubernetes", "--kubeconfig", c.Kubeconfig, "--kube-image", kubecluster.ImagePython,
		"--kube-node-airlock", bin, "--disk-quota", "none"}, extra...)
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", s.logTail())
		}
	})
	cl := s.client(t)
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-exited:
			t.Fatalf("airlock serve exited: %v\n%s", err, s.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.List(ctx, client.ListOptions{})
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("airlock serve not answering: %v\n%s", err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *kubeServe) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 12000 {
		b = b[len(b)-12000:]
	}
	return string(b)
}

func (s *kubeServe) client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New("unix://" + s.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// objects lists the names of kind (sandboxes, sandboxclaims, pods,
// secrets) labelled with sandbox id.
func objects(t testing.TB, c *kubecluster.Cluster, kind, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.KubectlOut(ctx, "", "get", kind, "-n", "default", "-l", "airlock.dev/sandbox="+id, "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get %s: %v", kind, err)
	}
	return strings.Fields(out)
}

// waitNoObjects waits until nothing of sandbox id is left in the cluster.
func waitNoObjects(t testing.TB, c *kubecluster.Cluster, id string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var left []string
		for _, kind := range []string{"sandboxes.agents.x-k8s.io", "sandboxclaims.extensions.agents.x-k8s.io", "pods", "secrets"} {
			left = append(left, objects(t, c, kind, id)...)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: left in the cluster: %v", id, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mustRun(t testing.TB, c *client.Client, id string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := c.Run(ctx, id, args...)
	if err != nil {
		t.Fatalf("exec %v: %v", args, err)
	}
	if r.Code != 0 {
		t.Fatalf("exec %v: exit %d: %s%s", args, r.Code, r.Stdout, r.Stderr)
	}
	return string(r.Stdout)
}
