package server

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// From a rollback's pause to its resume the sandbox's record says paused;
// the list shows it as its tenant knows it, running: in the default list
// (running), with all, and not among the paused. A real pause is listed
// paused. (The rollback itself, on the native backend, is
// TestE2ERequestsAcrossLifecycle's.)
func TestListShowsRollbackAsRunning(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	end := ts.srv.changes.begin(sb.ID, "rolled back")
	defer end()
	if err := ts.store.MarkPaused(ctx, sb.ID, "rollback to checkpoint cp-1", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	pausedEnd := ts.srv.changes.begin(other.ID, "paused")
	if err := ts.store.MarkPaused(ctx, other.ID, "paused through the API", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	pausedEnd()
	state := func(o client.ListOptions) map[string]string {
		t.Helper()
		l, err := c.List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, s := range l {
			m[s.ID] = s.State
		}
		return m
	}
	if got := state(client.ListOptions{}); got[sb.ID] != "running" || got[other.ID] != "" {
		t.Errorf("default list during a rollback: %v, want %s running and %s (paused) absent", got, sb.ID, other.ID)
	}
	if got := state(client.ListOptions{All: true}); got[sb.ID] != "running" || got[other.ID] != api.StatePaused {
		t.Errorf("list all during a rollback: %v, want %s running, %s paused", got, sb.ID, other.ID)
	}
	if got := state(client.ListOptions{State: api.StatePaused}); got[sb.ID] != "" || got[other.ID] != api.StatePaused {
		t.Errorf("list of the paused during a rollback: %v, want only %s", got, other.ID)
	}
}
