package server

import (
	"context"
	"testing"

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
