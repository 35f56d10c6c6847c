package kube

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testutil/kubecluster"
)

// BenchmarkKubeClaimVsCold: through `airlock serve --backend kubernetes`,
// a sandbox claimed from a ready warm pool (SandboxClaim) to its first
// exec, beside a cold one (a new Sandbox) to its first exec, in the same
// run; the pool is refilled off the clock between iterations.
//
//	go test -run '^$' -bench KubeClaimVsCold -benchtime 3x ./test/kube
func BenchmarkKubeClaimVsCold(b *testing.B) {
	c := kubecluster.Shared(b)
	createPool(b, c, "airlock-bench-pool", 1)
	cold := startKubeServe(b, c).client(b)
	warm := startKubeServe(b, c, "--kube-warm-pool", "airlock-bench-pool").client(b)
	var coldT, warmT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waitPoolReady(b, c, "airlock-bench-pool", 1)
		b.StartTimer()
		warmT += startToExec(b, warm)
		coldT += startToExec(b, cold)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(warmT.Milliseconds())/n, "warm-ms/op")
	b.ReportMetric(float64(coldT.Milliseconds())/n, "cold-ms/op")
	b.ReportMetric(float64(coldT)/float64(warmT), "cold/warm")
}

// startToExec creates a sandbox, runs `true` in it, and returns how long
// that took; the sandbox is then deleted (not counted).
func startToExec(b *testing.B, cl *client.Client) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	sb, err := cl.Create(ctx, api.CreateSandboxRequest{Backend: "kubernetes", Policy: json.RawMessage(poolPolicy)})
	if err != nil {
		b.Fatalf("create: %v", err)
	}
	r, err := cl.Run(ctx, sb.ID, "true")
	d := time.Since(t0)
	if err != nil || r.Code != 0 {
		b.Fatalf("exec: %v %+v", err, r)
	}
	b.StopTimer()
	if err := cl.Delete(ctx, sb.ID); err != nil {
		b.Fatalf("delete: %v", err)
	}
	b.StartTimer()
	return d
}
