package ocirt

import (
	"sort"
	"testing"
	"time"
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
	run("runc") // warm the image and the page cache
	run("airlock")
	var rs, as []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs = append(rs, run("runc"))
		as = append(as, run("airlock"))
	}
	b.StopTimer()
	mr, ma := median(rs), median(as)
	b.ReportMetric(float64(mr.Microseconds())/1000, "runc-ms/pod")
	b.ReportMetric(float64(ma.Microseconds())/1000, "airlock-ms/pod")
	b.ReportMetric(float64(ma)/float64(mr), "airlock/runc")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
