package agent

import (
	"context"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// BenchmarkExecTrue measures one exec of /bin/true on a running session
// over a socketpair: start, exit report, Wait. It reports the median.
func BenchmarkExecTrue(b *testing.B) {
	g := startGuest(b, guestOptions{})
	ctx := context.Background()
	req := sandbox.ExecRequest{Args: []string{"/bin/true"}}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		p, err := g.client.Exec(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
			b.Fatal(st, err)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkPing is one request/response round trip on a stream.
func BenchmarkPing(b *testing.B) {
	g := startGuest(b, guestOptions{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.client.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForkExecTrueBaseline is the floor: fork, exec and wait for
// /bin/true directly from a Go process, no agent.
func BenchmarkForkExecTrueBaseline(b *testing.B) {
	times := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		pid, err := syscall.ForkExec("/bin/true", []string{"/bin/true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
		if err != nil {
			b.Fatal(err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
}
