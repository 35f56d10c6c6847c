package client_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// reportPercentiles adds p50/p99 in milliseconds to b's results.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkExecTrue: round trip of /bin/true in an existing sandbox over
// the unix socket (buffered exec: one request).
func BenchmarkExecTrue(b *testing.B) {
	c := requireNative(b).client(b)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	if _, err := c.Run(ctx, sb.ID, "/bin/true"); err != nil {
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := c.Run(ctx, sb.ID, "/bin/true")
		ds = append(ds, time.Since(t0))
		if err != nil || r.Code != 0 {
			b.Fatal(err, r)
		}
	}
	b.StopTimer()
	reportPercentiles(b, ds)
}

// BenchmarkCreateWarm: create from a warm pool (the pool is refilled
// between iterations with the timer stopped, so each create is pooled).
func BenchmarkCreateWarm(b *testing.B) {
	requireNative(b)
	s, err := startServe(b.TempDir(), "--backend", "native", "--pool", "native/default=2")
	if err != nil {
		b.Fatal(err)
	}
	defer s.stop()
	c := s.client(b)
	ctx := context.Background()
	ds := make([]time.Duration, 0, b.N)
	pooled := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waitPoolFull(b, s)
		b.StartTimer()
		t0 := time.Now()
		sb, err := c.Create(ctx, api.CreateSandboxRequest{})
		d := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		ds = append(ds, d)
		if sb.Pooled {
			pooled++
		}
		c.Delete(ctx, sb.ID)
		b.StartTimer()
	}
	b.StopTimer()
	if pooled != b.N {
		b.Fatalf("%d of %d creates came from the pool", pooled, b.N)
	}
	reportPercentiles(b, ds)
}

// waitPoolFull waits until the server's pool gauge reports 2 ready.
func waitPoolFull(b *testing.B, s *serveProc) { waitPoolFullFor(b, s, "native") }

func waitPoolFullFor(b *testing.B, s *serveProc, backend string) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if poolReadyFor(s, backend) >= 2 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal("pool did not refill")
}

// BenchmarkColdCreateExecDelete: create+exec+delete without a pool from 8
// concurrent clients; reports sandboxes per second.
func BenchmarkColdCreateExecDelete(b *testing.B) {
	c := requireNative(b).client(b)
	ctx := context.Background()
	const clients = 8
	var mu sync.Mutex
	var ds []time.Duration
	next := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		next <- struct{}{}
	}
	close(next)
	b.ResetTimer()
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				s := time.Now()
				sb, err := c.Create(ctx, api.CreateSandboxRequest{})
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := c.Run(ctx, sb.ID, "/bin/true"); err != nil {
					b.Error(err)
				}
				if err := c.Delete(ctx, sb.ID); err != nil {
					b.Error(err)
				}
				mu.Lock()
				ds = append(ds, time.Since(s))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "sandboxes/s")
	reportPercentiles(b, ds)
}
