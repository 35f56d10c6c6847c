package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

var podSeq atomic.Int64

// podSpec is a Pod on runtimeClass running command in image (never
// pulled: the cluster imported it), with capabilities added to the
// container's (the same for both handlers, so an attack gets the same
// privileges under each).
func podSpec(name, runtimeClass, image string, command []string, caps []string) []byte {
	ctr := map[string]any{
		"name": "main", "image": image, "imagePullPolicy": "Never", "command": command,
	}
	if len(caps) > 0 {
		ctr["securityContext"] = map[string]any{"capabilities": map[string]any{"add": caps}}
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"runtimeClassName":              runtimeClass,
			"containers":                    []any{ctr},
			"terminationGracePeriodSeconds": 1,
			"automountServiceAccountToken":  false,
		},
	})
	return b
}

// podPhase is the part of a Pod's status the tests read.
type podPhase struct {
	Status struct {
		Phase      string                          `json:"phase"`
		Conditions []struct{ Type, Status string } `json:"conditions"`
		Reason     string                          `json:"reason"`
		Message    string                          `json:"message"`
		PodIP      string                          `json:"podIP"`
	} `json:"status"`
}

func (p podPhase) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" && c.Status == "True" {
			return true
		}
	}
	return false
}

// createPod creates a pod and waits until it is Ready, returning its name;
// it is deleted when the test ends.
func createPod(t testing.TB, c *kubecluster.Cluster, runtimeClass, image string, command, caps []string) string {
	t.Helper()
	var spec map[string]any
	if err := json.Unmarshal(podSpec("x", runtimeClass, image, command, caps), &spec); err != nil {
		t.Fatal(err)
	}
	return createPodFrom(t, c, runtimeClass, spec)
}

// createPodFrom creates the pod spec (its name replaced by a fresh one)
// and waits until it is Ready.
func createPodFrom(t testing.TB, c *kubecluster.Cluster, runtimeClass string, spec map[string]any) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", runtimeClass, podSeq.Add(1))
	spec["metadata"].(map[string]any)["name"] = name
	body, _ := json.Marshal(spec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.API(ctx, "POST", "/api/v1/namespaces/default/pods", body, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(t, c, name) })
	if err := waitReady(ctx, c, name); err != nil {
		events, _ := c.KubectlOut(context.Background(), "", "get", "events", "--field-selector", "involvedObject.name="+name)
		t.Fatalf("pod %s: %v\nevents:\n%s", name, err, events)
	}
	return name
}

func waitReady(ctx context.Context, c *kubecluster.Cluster, name string) error {
	for {
		var p podPhase
		err := c.API(ctx, "GET", "/api/v1/namespaces/default/pods/"+name, nil, &p)
		if err == nil && p.ready() {
			return nil
		}
		if err == nil && (p.Status.Phase == "Failed" || p.Status.Phase == "Succeeded") {
			return fmt.Errorf("pod ended: %s %s", p.Status.Phase, p.Status.Message)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not Ready: %v (last: %+v, %v)", ctx.Err(), p.Status, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deletePod deletes a pod and waits until it is gone.
func deletePod(t testing.TB, c *kubecluster.Cluster, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := "/api/v1/namespaces/default/pods/" + name
	if err := c.API(ctx, "DELETE", path+"?gracePeriodSeconds=0", nil, nil); err != nil {
		t.Logf("delete pod %s: %v", name, err)
		return
	}
	for c.API(ctx, "GET", path, nil, nil) == nil {
		select {
		case <-ctx.Done():
			t.Errorf("pod %s not gone after a minute", name)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kubectlExec runs a command in the pod through kubectl exec (the
// apiserver → kubelet → containerd streaming path), returning its output.
func kubectlExec(c *kubecluster.Cluster, pod string, command ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.KubectlOut(ctx, "", append([]string{"exec", pod, "--"}, command...)...)
}

const podCommand = "echo started-$(cat /proc/self/status | grep -c NoNewPrivs); trap 'exit 0' TERM; while :; do sleep 1; done"

// TestPodRunsExecLogs: a Pod on the airlock RuntimeClass runs to Ready,
// kubectl exec runs a command in it and kubectl logs shows its output; the
// same on runc. Under airlock the container's processes have no new
// privileges and Airlock's seccomp filter; under runc they do not (the
// pod spec asks for neither), so the handler really is the one named.
func TestPodRunsExecLogs(t *testing.T) {
	c := kubecluster.Shared(t)
	for _, rc := range []struct {
		class, nnp string
	}{{"airlock", "NoNewPrivs:\t1"}, {"runc", "NoNewPrivs:\t0"}} {
		t.Run(rc.class, func(t *testing.T) {
			pod := createPod(t, c, rc.class, kubecluster.ImageMinbase, []string{"bash", "-c", podCommand}, nil)
			out, err := kubectlExec(c, pod, "grep", "NoNewPrivs", "/proc/self/status")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, rc.nnp) {
				t.Errorf("exec in the %s pod: %q, want %q", rc.class, out, rc.nnp)
			}
			out, err = kubectlExec(c, pod, "sh", "-c", "echo exec-$((6*7))")
			if err != nil || strings.TrimSpace(out) != "exec-42" {
				t.Errorf("exec in the %s pod: %q, %v", rc.class, out, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			logs, err := c.KubectlOut(ctx, "", "logs", pod)
			if err != nil || !strings.Contains(logs, "started-1") {
				t.Errorf("kubectl logs %s: %q, %v", pod, logs, err)
			}
		})
	}
}
