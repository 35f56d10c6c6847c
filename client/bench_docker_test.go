package client_test

import (
	"context"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// BenchmarkDockerWarmCreateExec: what a caller of a server with a warm
// docker pool waits for: create (taken from the pool) plus the first exec
// (/bin/true, buffered) through the API. The pool refills between
// iterations with the timer stopped. Target: p50 under 10 ms.
func BenchmarkDockerWarmCreateExec(b *testing.B) {
	testutil.RequireRoot(b)
	if err := exec.Command("docker", "info").Run(); err != nil {
		testutil.Skip(b, "no docker daemon: "+err.Error())
	}
	s, err := startServe(b.TempDir(), "--backend", "docker", "--pool", "docker/default=2")
	if err != nil {
		b.Fatal(err)
	}
	defer s.stop()
	c := s.client(b)
	ctx := context.Background()
	var creates, totals []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waitPoolFullFor(b, s, "docker")
		time.Sleep(300 * time.Millisecond)
		b.StartTimer()
		t0 := time.Now()
		sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "docker"})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		r, err := c.Run(ctx, sb.ID, "/bin/true")
		t2 := time.Now()
		b.StopTimer()
		if err != nil || r.Code != 0 {
			b.Fatalf("exec: %v %+v", err, r)
		}
		if !sb.Pooled {
			b.Fatalf("create %d did not come from the pool", i)
		}
		creates, totals = append(creates, t1.Sub(t0)), append(totals, t2.Sub(t0))
		c.Delete(ctx, sb.ID)
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, totals)
	sort.Slice(creates, func(i, j int) bool { return creates[i] < creates[j] })
	b.ReportMetric(float64(creates[len(creates)/2].Microseconds())/1000, "create-p50-ms")
}
