package server

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// BenchmarkExecOverheadFake measures what the server and the SDK add to an
// exec round trip over the unix socket (the fake backend runs nothing).
func BenchmarkExecOverheadFake(b *testing.B) {
	ts := newTestServer(b, nil)
	c := ts.local(b)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Run(ctx, sb.ID, "true"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreatePooledFake measures the API's own cost of a pooled create
// (store row, event, quota) with a backend that costs nothing.
func BenchmarkCreatePooledFake(b *testing.B) {
	ts := newTestServer(b, func(c *Config) { c.Pools = []PoolConfig{{Backend: "fake", Size: 4}} })
	c := ts.local(b)
	ctx := context.Background()
	p := func() *pool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return ts.srv.pools[poolKey{backend: "fake", profile: "default"}]
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for p.readyCount() < 4 {
			time.Sleep(100 * time.Microsecond)
		}
		b.StartTimer()
		sb, err := c.Create(ctx, api.CreateSandboxRequest{})
		if err != nil || !sb.Pooled {
			b.Fatal(err, sb)
		}
		b.StopTimer()
		c.Delete(ctx, sb.ID)
		b.StartTimer()
	}
}
