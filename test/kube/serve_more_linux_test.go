package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/backend/kubernetes"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
	"github.com/airlock-dev/airlock/policy"
)

// poolPolicy is what warm-pool sandboxes ask (and the pool's template is
// made from): no network, the limits below.
const poolPolicy = `{"network":{"mode":"none"},"limits":{"memory":"512Mi","cpus":1}}`

// createPool makes a SandboxTemplate (the pod the kubernetes backend would
// make for poolPolicy) and a SandboxWarmPool of replicas pods from it, and
// waits until they are ready; both are deleted when the test ends.
func createPool(t testing.TB, c *kubecluster.Cluster, name string, replicas int32) {
	t.Helper()
	b := kubernetes.New(kubernetes.Config{Image: kubecluster.ImagePython, NodeAgent: testutil.AirlockBinary(t)})
	pol := &policy.Policy{Version: 1, Filesystem: policy.Filesystem{Workspace: "/workspace", WorkspaceMount: "/workspace"},
		Limits: policy.Limits{Memory: 512 << 20, CPUs: 1}}
	tpl, err := b.Template(name, "default", "", pol)
	if err != nil {
		t.Fatal(err)
	}
	tpl.APIVersion, tpl.Kind = "extensions.agents.x-k8s.io/v1beta1", "SandboxTemplate"
	pool := map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"replicas": replicas, "sandboxTemplateRef": map[string]any{"name": name}},
	}
	var docs []string
	for _, o := range []any{tpl, pool} {
		j, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(j))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.Apply(ctx, strings.Join(docs, "\n---\n")); err != nil {
		t.Fatalf("apply pool: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c.KubectlOut(ctx, "", "delete", "-n", "default", "--wait=true", "sandboxwarmpools.extensions.agents.x-k8s.io/"+name, "sandboxtemplates.extensions.agents.x-k8s.io/"+name)
	})
	waitPoolReady(t, c, name, replicas)
}

// waitPoolReady waits until the pool has n ready pods.
func waitPoolReady(t testing.TB, c *kubecluster.Cluster, name string, n int32) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var pool struct {
			Status struct {
				ReadyReplicas int32 `json:"readyReplicas"`
			} `json:"status"`
		}
		err := c.API(context.Background(), "GET", "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxwarmpools/"+name, nil, &pool)
		if err == nil && pool.Status.ReadyReplicas >= n {
			return
		}
		if time.Now().After(deadline) {
			out, _ := c.KubectlOut(context.Background(), "", "get", "sandboxes,pods", "-n", "default", "-o", "wide")
			t.Fatalf("warm pool %s: %d ready, want %d (%v)\n%s", name, pool.Status.ReadyReplicas, n, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestServeKubernetesWarmPool: with --kube-warm-pool, a sandbox is a
// SandboxClaim on the pool: one of its ready pods, whose agent waited on
// its stdin, runs commands; destroyed, the claim, its Sandbox and pod are
// gone. A policy that the pool's pods cannot give (a network, which needs
// the egress CA in the pod) is refused.
func TestServeKubernetesWarmPool(t *testing.T) {
	c := kubecluster.Shared(t)
	createPool(t, c, "airlock-pool", 1)
	s := startKubeServe(t, c, "--kube-warm-pool", "airlock-pool")
	cl := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := cl.Create(ctx, api.CreateSandboxRequest{Backend: "kubernetes", Policy: json.RawMessage(poolPolicy)})
	if err != nil {
		t.Fatalf("create from the warm pool: %v", err)
	}
	if claims := objects(t, c, "sandboxclaims.extensions.agents.x-k8s.io", sb.ID); len(claims) != 1 {
		t.Fatalf("claims of %s: %v", sb.ID, claims)
	}
	if out := mustRun(t, cl, sb.ID, "sh", "-c", "echo claimed; id -u"); out != "claimed\n"+fmt.Sprint(kubernetes.NodeIDBase)+"\n" {
		t.Fatalf("exec in the claimed pod: %q", out)
	}
	var pod string
	if claim, err := c.KubectlOut(ctx, "", "get", "sandboxclaims.extensions.agents.x-k8s.io", "-n", "default", "-l", "airlock.dev/sandbox="+sb.ID, "-o", "jsonpath={.items[0].status.sandbox.name}"); err == nil {
		pod = strings.TrimSpace(claim)
	}
	if err := cl.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitNoObjects(t, c, sb.ID)
	if pod != "" {
		if out, _ := c.KubectlOut(ctx, "", "get", "pods,sandboxes.agents.x-k8s.io", "-n", "default", "--field-selector", "metadata.name="+pod, "-o", "name"); strings.TrimSpace(out) != "" {
			t.Fatalf("the claimed sandbox %s is still there: %s", pod, out)
		}
	}
	_, err = cl.Create(ctx, api.CreateSandboxRequest{Backend: "kubernetes", Policy: json.RawMessage(`{"network":{"mode":"open"},"limits":{"memory":"512Mi","cpus":1}}`)})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "warm pool") {
		t.Fatalf("a networked sandbox from the pool: %v", err)
	}
}

// TestAgentLoopExampleOnCluster: the Python SDK's agent-loop example runs
// to its answer against serve on the cluster, unchanged.
func TestAgentLoopExampleOnCluster(t *testing.T) {
	c := kubecluster.Shared(t)
	py := testutil.RequireBinary(t, "python3")
	s := startKubeServe(t, c)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(root, "examples", "python", "agent_loop.py"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "sdk", "python"), "AIRLOCK_HOST=unix://"+s.socket)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent_loop.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "KeyError") || !strings.HasSuffix(strings.TrimSpace(string(out)), "The total revenue is 150.0.") {
		t.Fatalf("agent_loop.py output:\n%s", out)
	}
	t.Logf("agent_loop.py:\n%s", out)
}
