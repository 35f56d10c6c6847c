//go:build linux && gvisorshim

// The gvisor RuntimeClass's tests: they need a host whose root may give
// runsc's containerd shim the oom_score_adj (-999) it insists on
// (CAP_SYS_RESOURCE), which this project's machines do not have, so they
// are built only with -tags gvisorshim:
//
//	go test -tags gvisorshim -run Gvisor ./test/kube

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/backend/kubernetes"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// TestEscapeFromGvisorPod: the escape subset and its runc baseline
// (TestEscapeFromAirlockPod), the pod under the gvisor RuntimeClass
// (gVisor's runsc through its own containerd shim,
// deploy/kubernetes/containerd-gvisor.toml): every attack must be
// blocked there too, the added capabilities being gVisor's kernel's.
func TestEscapeFromGvisorPod(t *testing.T) {
	c := kubecluster.Shared(t)
	if !c.Gvisor {
		testutil.Skip(t, c.GvisorWhy)
	}
	escapeSubset(t, "gvisor")
}

// TestServeKubernetesGvisor: `airlock serve --backend kubernetes
// --kube-runtime-class gvisor` places sandboxes in pods under gVisor's
// runsc (its own containerd shim): commands and files work through the
// agent as under the airlock class, the pod's kernel is gVisor's, and
// the tenant attacks on the cluster (the service account token, the
// kubelet's API) are blocked, as the same scripts in a runc pod are not
// (TestServeKubernetesSandboxAttacks shows that baseline).
func TestServeKubernetesGvisor(t *testing.T) {
	c := kubecluster.Shared(t)
	if !c.Gvisor {
		testutil.Skip(t, c.GvisorWhy)
	}
	s := startKubeServe(t, c, "--kube-runtime-class", "gvisor")
	cl := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := cl.Create(ctx, api.CreateSandboxRequest{Backend: "kubernetes", Policy: json.RawMessage(`{"network":{"mode":"open"}}`)})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer cl.Delete(context.Background(), sb.ID)
	rc, _ := c.KubectlOut(ctx, "", "get", "pods", "-l", "airlock.dev/sandbox="+sb.ID, "-o", "jsonpath={.items[0].spec.runtimeClassName}")
	if rc != "gvisor" {
		t.Fatalf("the sandbox's pod runs under runtime class %q, want gvisor", rc)
	}
	// gVisor's kernel answers, not the node's.
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(kubernetes.NodeIDBase) + "\n"
	if out := mustRun(t, cl, sb.ID, "sh", "-c", "id -u; uname -r"); !strings.HasPrefix(out, want) || out == want+unix.ByteSliceToString(u.Release[:])+"\n" {
		t.Fatalf("exec: %q, want the sandbox's node uid and a kernel release that is not the node's", out)
	}
	if err := cl.WriteFile(ctx, sb.ID, "/workspace/hello.txt", strings.NewReader("hello\n"), 0o644); err != nil {
		t.Fatalf("write file: %v", err)
	}
	if out := mustRun(t, cl, sb.ID, "cat", "/workspace/hello.txt"); out != "hello\n" {
		t.Fatalf("file written through the API, read by exec: %q", out)
	}
	for _, a := range sandboxAttacks {
		t.Run(a.name, func(t *testing.T) {
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
