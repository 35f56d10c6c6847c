package server

import (
	"context"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// Everything that ends a process ends its group: DELETE of a background
// process and a client that goes away from a streamed exec use Kill, not
// a signal to the top process alone (which left `sleep 100` of
// `sh -c "sleep 100; echo"` running).
func TestEndingAProcessKillsItsGroup(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctx, sb.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	if n := ts.fake.Kills.Load(); n != 1 {
		t.Fatalf("DELETE of a process: %d group kills, want 1", n)
	}
	// A streamed exec whose client goes away.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(cctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "100"}})
		done <- err
	}()
	eventually(t, "the streamed exec to start", func() bool { return ts.fake.Processes() > 0 })
	cancel()
	<-done
	eventually(t, "a group kill after the client went away", func() bool { return ts.fake.Kills.Load() == 2 })
}
