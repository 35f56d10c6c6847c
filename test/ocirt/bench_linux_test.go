package ocirt

import (
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// BenchmarkPodStartup: a pod's start-up (run the pod sandbox, create and
// start its container: what the kubelet waits for) through the runc and
// the airlock handlers of one containerd, alternating, in one run. It
// reports each handler's median and the ratio airlock/runc.
func BenchmarkPodStartup(b *testing.B) {
	c := startContainerd(b)
	run := func(handler string) time.Duration {
		pc := c.podConfig(b, nil)
		cc := c.containerConfig(b, "bench", []string{"sh", "-c", podCommand}, nil)
		args := []string{"runp"}
		if handler != "runc" {
			args = append(args, "--runtime", handler)
		}
		t0 := time.Now()
		pod := c.crictl(b, append(args, pc)...)
		ctr := c.crictl(b, "create", pod, cc, pc)
		c.crictl(b, "start", ctr)
		d := time.Since(t0)
		c.crictl(b, "stopp", pod)
		c.crictl(b, "rmp", pod)
		return d
	}
	testutil.SideBySide(b, "runc", "airlock", "pod", run)
}
