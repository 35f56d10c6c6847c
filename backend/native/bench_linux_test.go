package native

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// BenchmarkCreateExecDestroy is `airlock run -- /bin/true` minus the CLI:
// create a default-policy sandbox, run /bin/true in it, destroy it.
func BenchmarkCreateExecDestroy(b *testing.B) {
	be := testBackend(b)
	ws := workspace(b)
	pol := testPolicy(b, ws, nil)
	ctx := context.Background()
	for b.Loop() {
		sb, err := be.Create(ctx, sandbox.Spec{ID: newID(b), Policy: pol})
		if err != nil {
			b.Fatal(err)
		}
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
			b.Fatalf("wait: %v %+v", err, st)
		}
		if err := sb.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExec is the cost of one exec of /bin/true in a running
// sandbox through its agent, beside its floor: the same /bin/true forked,
// exec'd and reaped straight from this process, no sandbox and no agent,
// alternating with it in the same run. It reports both medians and their
// ratio (the issue-12 target is an exec p50 under 1 ms).
func BenchmarkExec(b *testing.B) {
	be := testBackend(b)
	ws := workspace(b)
	ctx := context.Background()
	sb, err := be.Create(ctx, sandbox.Spec{ID: newID(b), Policy: testPolicy(b, ws, nil)})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	var inSandbox, floor []time.Duration
	for b.Loop() {
		t0 := time.Now()
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/true"}})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
			b.Fatalf("wait: %v %+v", err, st)
		}
		inSandbox = append(inSandbox, time.Since(t0))
		t0 = time.Now()
		pid, err := syscall.ForkExec("/bin/true", []string{"/bin/true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
		if err != nil {
			b.Fatal(err)
		}
		var wst syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &wst, 0, nil); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(t0))
	}
	p50, p99 := percentiles(inSandbox)
	f50, _ := percentiles(floor)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(f50.Microseconds()), "floor-p50-µs")
	b.ReportMetric(float64(p50)/float64(f50), "ratio")
}

// percentiles are the median and 99th percentile of ds (sorted in place).
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}
