package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/backend/kubernetes"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// TestServeKubernetesSandbox: `airlock serve --backend kubernetes` on the
// real cluster; through the Go SDK a sandbox is created (an agent-sandbox
// Sandbox whose pod runs under the airlock RuntimeClass), runs commands,
// writes and reads files, runs a terminal, reaches an allowed host
// through serve's egress proxy and no other; destroyed, its Sandbox, pod
// and Secret are gone.
func TestServeKubernetesSandbox(t *testing.T) {
	c := kubecluster.Shared(t)
	web := webServer(t)
	s := startKubeServe(t, c)
	cl := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pol := fmt.Sprintf(`{"network":{"mode":"allowlist","allow":[%q]},"limits":{"memory":"512Mi","cpus":1}}`, web)
	sb, err := cl.Create(ctx, api.CreateSandboxRequest{Backend: "kubernetes", Policy: json.RawMessage(pol)})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if pods := objects(t, c, "pods", sb.ID); len(pods) != 1 {
		t.Fatalf("pods of sandbox %s: %v", sb.ID, pods)
	}
	rc, _ := c.KubectlOut(ctx, "", "get", "pods", "-l", "airlock.dev/sandbox="+sb.ID, "-o", "jsonpath={.items[0].spec.runtimeClassName}")
	if rc != "airlock" {
		t.Fatalf("the sandbox's pod runs under runtime class %q, want airlock", rc)
	}
	if out := mustRun(t, cl, sb.ID, "sh", "-c", "id -u; cat /etc/os-release | grep ^ID="); out != fmt.Sprint(kubernetes.NodeIDBase)+"\nID=debian\n" {
		t.Fatalf("exec: %q", out)
	}
	if err := cl.WriteFile(ctx, sb.ID, "/workspace/hello.txt", strings.NewReader("hello from the SDK\n"), 0o644); err != nil {
		t.Fatalf("write file: %v", err)
	}
	if out := mustRun(t, cl, sb.ID, "cat", "/workspace/hello.txt"); out != "hello from the SDK\n" {
		t.Fatalf("file written through the API, read by exec: %q", out)
	}
	mustRun(t, cl, sb.ID, "sh", "-c", "echo made inside > /workspace/inside.txt")
	rd, err := cl.ReadFile(ctx, sb.ID, "/workspace/inside.txt")
	if err != nil {
		t.Fatalf("read file: %v", err)
	}
	got, _ := io.ReadAll(rd)
	rd.Close()
	if string(got) != "made inside\n" {
		t.Fatalf("file read through the API: %q", got)
	}
	checkPTY(t, cl, sb.ID)
	checkEgress(t, cl, sb.ID, web)
	if err := cl.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitNoObjects(t, c, sb.ID)
}

// checkPTY runs a shell on a terminal: it is a TTY, and keyboard input
// reaches it.
func checkPTY(t *testing.T, cl *client.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := cl.PTY(ctx, id, client.PTYOptions{Args: []string{"sh"}, Rows: 24, Cols: 80})
	if err != nil {
		t.Fatalf("pty: %v", err)
	}
	defer p.Close()
	if _, err := io.WriteString(p, "tty -s && echo TTY-$((6*7)); exit\n"); err != nil {
		t.Fatalf("pty write: %v", err)
	}
	var out bytes.Buffer
	io.Copy(&out, p)
	if !strings.Contains(out.String(), "TTY-42") {
		t.Fatalf("pty output: %q", out.String())
	}
}

// checkEgress: from inside the pod (which has no network of its own), the
// allowed host answers through the agent's tunnel and serve's proxy; the
// node's kubelet port, not allowed, does not.
func checkEgress(t *testing.T, cl *client.Client, id, web string) {
	t.Helper()
	fetch := func(url string) string {
		return mustRun(t, cl, id, "python3", "-c", `import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())
except Exception as e:
    print("refused:", e)`, url)
	}
	if out := fetch("http://" + web + "/"); !strings.HasPrefix(out, "hello from the host web server") {
		t.Fatalf("allowed host through the proxy: %q", out)
	}
	kubelet := net.JoinHostPort(kubecluster.NodeIP, "10250")
	if out := fetch("http://" + kubelet + "/pods"); !strings.HasPrefix(out, "refused:") {
		t.Fatalf("the node's kubelet, not allowed, answered: %q", out)
	}
}

// webServer is an HTTP server on the node's address (a host address
// beside the kubelet's; loopback would be the pod's own), its address.
func webServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(kubecluster.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the host web server")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestServeKubernetesCreateFailsClean: a sandbox whose image the cluster
// does not have fails with a clear error, and a policy asking for a host
// path is refused before anything is made; neither leaves a Sandbox, pod
// or Secret.
func TestServeKubernetesCreateFailsClean(t *testing.T) {
	c := kubecluster.Shared(t)
	s := startKubeServe(t, c)
	cl := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := cl.Create(ctx, api.CreateSandboxRequest{Backend: "kubernetes", Image: "airlock.test/no-such-image:1"})
	if err == nil || !strings.Contains(err.Error(), "no-such-image") {
		t.Fatalf("create with a missing image: %v", err)
	}
	t.Logf("missing image: %v", err)
	_, err = cl.Create(ctx, api.CreateSandboxRequest{Backend: "kubernetes", Policy: json.RawMessage(`{"filesystem":{"read_only":["/var/lib/kubelet"]}}`)})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "/var/lib/kubelet") {
		t.Fatalf("create with a host path: %v", err)
	}
	t.Logf("host path: %v", err)
	list, err := cl.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list {
		waitNoObjects(t, c, sb.ID)
	}
	out, err := c.KubectlOut(ctx, "", "get", "sandboxes.agents.x-k8s.io,pods,secrets", "-n", "default", "-l", "airlock.dev/backend=kubernetes", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("left in the cluster after failed creates: %q %v", out, err)
	}
}
