package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// BenchmarkPodStart: a pod's start-up as a user sees it, from the create
// request to the pod Ready (scheduler, kubelet, CRI sandbox and container
// start, status back to the apiserver), through the airlock and the runc
// RuntimeClasses alternating in one run on one cluster. It reports each
// median and the ratio airlock/runc.
//
//	go test -run '^$' -bench PodStart -benchtime 5x ./test/kube
func BenchmarkPodStart(b *testing.B) {
	c := kubecluster.Shared(b)
	start := func(class string) time.Duration {
		name := fmt.Sprintf("bench-%s-%d", class, podSeq.Add(1))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		spec := podSpec(name, class, kubecluster.ImageMinbase, []string{"sleep", "infinity"}, nil)
		t0 := time.Now()
		if err := c.API(ctx, "POST", "/api/v1/namespaces/default/pods", spec, nil); err != nil {
			b.Fatal(err)
		}
		if err := waitReady(ctx, c, name); err != nil {
			b.Fatalf("pod %s: %v", name, err)
		}
		d := time.Since(t0)
		b.StopTimer()
		deletePod(b, c, name)
		b.StartTimer()
		return d
	}
	testutil.SideBySide(b, "runc", "airlock", "pod", start)
}
