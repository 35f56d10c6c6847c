package kube

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// escapeAttacks are a subset of the escape suite (test/escape/attacks, its
// static binary mounted into the pod read-only), one per kind of escape:
// the kernel's attack surface (bpf, perf events, the keyring), new
// namespaces, raw sockets, and the network reach to a host service.
var escapeAttacks = []struct {
	name string
	args []string
}{
	{"bpf", nil},
	{"perf", nil},
	{"keyctl", nil},
	{"userns-create", nil},
	{"af-packet", nil},
	{"tcp", []string{"addrs=HOST", "token=airlock-kube-escape"}},
}

// escapeCaps are the privileges the attack pods ask for, the same under
// every handler: under runc they are granted, under airlock they are
// capped by the operator's ceiling, under gvisor they are gVisor's
// kernel's.
var escapeCaps = []string{"SYS_ADMIN", "NET_RAW", "NET_ADMIN"}

// TestEscapeFromAirlockPod: each attack is first run in a runc pod, where
// it must succeed (so the attack itself works and a broken one cannot pass
// as blocked), then in an airlock pod of the same spec, where it must be
// blocked.
func TestEscapeFromAirlockPod(t *testing.T) { escapeSubset(t, "airlock") }

func escapeSubset(t *testing.T, runtimeClass string) {
	c := kubecluster.Shared(t)
	bin := buildAttacks(t)
	host := hostService(t)
	pods := map[string]string{}
	for _, rc := range []string{"runc", runtimeClass} {
		pods[rc] = createAttackPod(t, c, rc, filepath.Dir(bin))
	}
	for _, a := range escapeAttacks {
		args := append([]string{"/attacks/attacks", a.name}, a.args...)
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "HOST", host)
		}
		t.Run(a.name, func(t *testing.T) {
			code, out := execCode(c, pods["runc"], args...)
			if code != 0 {
				t.Fatalf("baseline (runc): attack %s does not work unconfined (exit %d), so it proves nothing:\n%s", a.name, code, out)
			}
			code, out = execCode(c, pods[runtimeClass], args...)
			if code != 1 {
				t.Fatalf("%s pod: attack %s exit %d, want 1 (blocked):\n%s", runtimeClass, a.name, code, out)
			}
			t.Logf("runc: escaped; %s: %s", runtimeClass, strings.TrimSpace(out))
		})
	}
}

// buildAttacks builds the escape suite's static payload into a dir of its
// own (the pods mount it read-only).
func buildAttacks(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "attacks")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/airlock-dev/airlock/test/escape/attacks")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the attacks: %v\n%s", err, out)
	}
	return bin
}

// hostService listens on the node's address (a host service a pod could
// reach: the kubelet's, the apiserver's), answering each connection.
func hostService(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", kubecluster.NodeIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("host-service\n"))
			conn.Close()
		}
	}()
	return l.Addr().String()
}

// createAttackPod is a pod of the minbase image with the attacks mounted
// read-only at /attacks and escapeCaps added.
func createAttackPod(t *testing.T, c *kubecluster.Cluster, runtimeClass, attacksDir string) string {
	t.Helper()
	var spec map[string]any
	b := podSpec("x", runtimeClass, kubecluster.ImageMinbase, []string{"bash", "-c", podCommand}, escapeCaps)
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	ps := spec["spec"].(map[string]any)
	ps["volumes"] = []any{map[string]any{"name": "attacks", "hostPath": map[string]any{"path": attacksDir, "type": "Directory"}}}
	ctr := ps["containers"].([]any)[0].(map[string]any)
	ctr["volumeMounts"] = []any{map[string]any{"name": "attacks", "mountPath": "/attacks", "readOnly": true}}
	return createPodFrom(t, c, runtimeClass, spec)
}

// execCode runs a command in the pod through kubectl exec and returns its
// exit code (kubectl exec exits with the command's) and output.
func execCode(c *kubecluster.Cluster, pod string, args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Kubectl(ctx, append([]string{"exec", pod, "--"}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		return -1, err.Error() + ": " + string(out)
	}
	return 0, string(out)
}
