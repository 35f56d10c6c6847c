package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// running reports whether a process whose command line contains marker
// runs in sandbox id.
func running(t *testing.T, c *client.Client, id, marker string) bool {
	t.Helper()
	r, err := c.Run(context.Background(), id, "sh", "-c", `for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null; echo; done`)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(r.Stdout), marker)
}

// Ending a process ends its group: `sh -c "sleep N; echo"` leaves no sleep
// behind, whether it is DELETEd or its client goes away.
func TestE2EEndingAProcessEndsItsGroup(t *testing.T) {
	c := requireNative(t).client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "native"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), sb.ID) })

	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sh", "-c", "sleep 1231; echo"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the background sleep to start", func() bool { return running(t, c, sb.ID, "sleep 1231") })
	if err := c.Kill(ctx, sb.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "DELETE to end the sleep of sh -c", func() bool { return !running(t, c, sb.ID, "sleep 1231") })

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(cctx, sb.ID, client.ExecOptions{Args: []string{"sh", "-c", "sleep 1232; echo"}})
		done <- err
	}()
	eventually(t, "the streamed sleep to start", func() bool { return running(t, c, sb.ID, "sleep 1232") })
	cancel()
	<-done
	eventually(t, "a client going away to end the sleep of sh -c", func() bool { return !running(t, c, sb.ID, "sleep 1232") })
}
