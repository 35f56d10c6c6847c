package kube

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// The running cluster changes the host (sysctls, iptables, kubelet and
// CNI state, cgroups, mounts): else the restoration TestMain checks after
// every test (kubecluster.StopShared: the host as before, no directory
// or process of the cluster left) would prove nothing. A pod runs first,
// so the kubelet has done its work.
func TestClusterChangesHost(t *testing.T) {
	c := kubecluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Apply(ctx, string(podSpec("restored", "airlock", kubecluster.ImageBusybox, []string{"sleep", "1000"}, nil))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c.KubectlOut(ctx, "", "delete", "pod", "restored", "--grace-period=0", "--wait=true")
	})
	if err := waitReady(ctx, c, "restored"); err != nil {
		t.Fatal(err)
	}
	now, err := kubecluster.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Before.Diff(now)) == 0 {
		t.Fatal("the running cluster changed nothing on the host: the restoration check cannot tell")
	}
}
