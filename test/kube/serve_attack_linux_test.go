package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// sandboxAttacks are what a tenant's code in a sandbox would try against
// the cluster: the pod's service account token (the API server's keys to
// the namespace) and the node's kubelet API. Each prints ESCAPED when it
// gets through.
var sandboxAttacks = []struct{ name, script string }{
	{"service-account-token", `
import os
p = "/var/run/secrets/kubernetes.io/serviceaccount/token"
print("ESCAPED" if os.path.exists(p) and open(p).read() else "blocked: no token")`},
	{"kubelet-api", `
import socket
try:
    socket.create_connection(("` + kubecluster.NodeIP + `", 10250), timeout=5).close()
    print("ESCAPED")
except OSError as e:
    print("blocked:", e)`},
}

// TestServeKubernetesSandboxAttacks: each attack, run through the API in
// a sandbox of serve on the cluster, is blocked; the same script in a
// plain pod of the same image under runc, with the cluster's defaults (a
// token mounted, the pod network), gets through, so the attack works.
func TestServeKubernetesSandboxAttacks(t *testing.T) {
	c := kubecluster.Shared(t)
	baseline := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "x", "namespace": "default"},
		"spec": map[string]any{
			"runtimeClassName":              "runc",
			"terminationGracePeriodSeconds": 1,
			"containers": []any{map[string]any{
				"name": "main", "image": kubecluster.ImagePython, "imagePullPolicy": "Never",
				"command": []string{"sleep", "infinity"},
			}},
		},
	}
	pod := createPodFrom(t, c, "runc", baseline)
	s := startKubeServe(t, c)
	cl := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := cl.Create(ctx, api.CreateSandboxRequest{Backend: "kubernetes", Policy: json.RawMessage(`{"network":{"mode":"open"}}`)})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer cl.Delete(context.Background(), sb.ID)
	for _, a := range sandboxAttacks {
		t.Run(a.name, func(t *testing.T) {
			_, out := execCode(c, pod, "python3", "-c", a.script)
			if !strings.Contains(out, "ESCAPED") {
				t.Fatalf("baseline (a runc pod): the attack does not work unconfined, so it proves nothing: %s", out)
			}
			r, err := cl.Run(ctx, sb.ID, "python3", "-c", a.script)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(r.Stdout) + string(r.Stderr); strings.Contains(got, "ESCAPED") || !strings.Contains(got, "blocked") {
				t.Fatalf("from the sandbox: %s", got)
			}
		})
	}
}
