package server

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// BenchmarkHandOut measures a pooled create's hand-out alone (plan, take,
// policy check, network, quota; no HTTP, no store row) from a profile pool
// and from a template's image pool, with the fake backend.
func BenchmarkHandOut(b *testing.B) {
	ts := newTestServer(b, func(c *Config) {
		withImages(b)(c)
		c.Pools = []PoolConfig{{Backend: "fake", Size: 2}}
	})
	importBase(b, ts, "1")
	if err := ts.srv.startPool(PoolConfig{Backend: "fake", Image: poolImage, Size: 2}); err != nil {
		b.Fatal(err)
	}
	c := caller{tenant: "alice"}
	for _, tc := range []struct {
		name string
		req  api.CreateSandboxRequest
	}{
		{"profile", api.CreateSandboxRequest{}},
		{"image", e2bShape(`{"mode":"open"}`, nil)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				waitReady(b, ts)
				b.StartTimer()
				plan, err := ts.srv.planCreate(c, tc.req)
				if err != nil {
					b.Fatal(err)
				}
				l, _, release, err := ts.srv.obtain(context.Background(), c, plan)
				if err != nil || !l.pooled {
					b.Fatal("not pooled", err)
				}
				b.StopTimer()
				release()
				ts.srv.destroy(l, "bench")
				b.StartTimer()
			}
		})
	}
}

func waitReady(b *testing.B, ts *testServer) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Microsecond) {
		ts.srv.mu.Lock()
		full := true
		for _, p := range ts.srv.pools {
			full = full && p.readyCount() == p.size
		}
		ts.srv.mu.Unlock()
		if full {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("pools not refilled")
		}
	}
}
