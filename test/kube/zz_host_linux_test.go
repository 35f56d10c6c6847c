package kube

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// TestHostStateRestored runs last (its file sorts last): it stops the
// shared cluster (started here if no test did, with a pod run so the
// kubelet has done its work) and checks the host is as before it started:
// the sysctls the kubelet sets, iptables and ip6tables (tables, chains,
// rules), /var/lib/kubelet, /var/log/pods, /var/log/containers,
// /var/lib/cni, containerd's network namespaces, the bridge, the kubepods
// cgroups and the mounts, and that no process of the cluster is left.
func TestHostStateRestored(t *testing.T) {
	c := kubecluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Apply(ctx, string(podSpec("restored", "airlock", kubecluster.ImageBusybox, []string{"sleep", "1000"}, nil))); err != nil {
		t.Fatal(err)
	}
	if err := waitReady(ctx, c, "restored"); err != nil {
		t.Fatal(err)
	}
	before, dir := c.Before, c.Dir
	// The kubelet did change the host (else this proves nothing).
	now, err := kubecluster.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Diff(now)) == 0 {
		t.Fatal("the running cluster changed nothing on the host: the comparison cannot tell")
	}
	// The pods' cleanups run now, before the stop (t.Cleanup would be too
	// late).
	deleteAllPods(t, c)
	if err := kubecluster.StopShared(); err != nil {
		t.Fatal(err)
	}
	after := lockedSnapshot(t)
	if d := before.Diff(after); len(d) > 0 {
		t.Fatalf("host differs:\n%s", strings.Join(d, "\n"))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s left behind: %v", dir, err)
	}
	if pids := processesUnder(dir); len(pids) > 0 {
		t.Errorf("processes of the cluster left: %v", pids)
	}
}

func deleteAllPods(t *testing.T, c *kubecluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.KubectlOut(ctx, "", "delete", "pods", "--all", "--grace-period=0", "--wait=true"); err != nil {
		t.Fatal(err)
	}
}

// processesUnder lists the processes whose command line names dir.
func processesUnder(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
