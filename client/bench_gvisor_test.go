package client_test

import (
	"bytes"
	"context"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// requireGvisorServe starts airlock serve offering the gvisor backend
// (with extra flags), or skips when this host has no runsc.
func requireGvisorServe(t testing.TB, extra ...string) *serveProc {
	t.Helper()
	requireNative(t)
	if _, err := exec.LookPath("runsc"); err != nil {
		testutil.Skip(t, "no runsc: "+err.Error()+" (make deps builds it)")
	}
	s, err := startServe(t.TempDir(), append([]string{"--backend", "gvisor"}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

// A gVisor sandbox says which runsc runs it and on which platform, through
// the API (GET /v1/sandboxes/{id}), as `airlock doctor` does for the host.
func TestGvisorSandboxRuntime(t *testing.T) {
	s := requireGvisorServe(t)
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	got, err := c.Get(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	doctor, err := exec.Command(airlockBin, "doctor", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	p := got.Runtime["platform"]
	if p == "" || got.Runtime["runsc_version"] == "" || !bytes.Contains(doctor, []byte(`"platform": "`+p+`"`)) {
		t.Fatalf("runtime %v; doctor:\n%s", got.Runtime, doctor)
	}
	t.Logf("runtime: %v", got.Runtime)
}

// BenchmarkGvisorWarmCreateExec: create from a warm pool of gVisor
// sandboxes plus the first exec of /bin/true in it, as a client sees it
// (p50/p99 of the two together; create-p50 alone).
func BenchmarkGvisorWarmCreateExec(b *testing.B) {
	s := requireGvisorServe(b, "--pool", "gvisor/default=2")
	c := s.client(b)
	ctx := context.Background()
	var creates, totals []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waitPoolFullFor(b, s, "gvisor")
		b.StartTimer()
		t0 := time.Now()
		sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "gvisor"})
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
