package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// MarkAllStopped returns exactly the sandboxes it stopped, also while
// others are being inserted: a SELECT then an UPDATE outside one
// transaction stopped rows it never reported.
func TestMarkAllStoppedIsAtomic(t *testing.T) {
	t.Parallel()
	st, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				st.InsertSandbox(ctx, &Record{ID: fmt.Sprintf("sb-%d-%d", round, i), Tenant: "t", Backend: "fake", Spec: []byte("{}"), State: StateRunning, CreatedAt: time.Now()})
			}
		}()
		time.Sleep(time.Millisecond)
		reason := fmt.Sprintf("round %d", round)
		ids, err := st.MarkAllStopped(ctx, reason, time.Now())
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, id := range ids {
			got[id] = true
		}
		rows, err := st.db.QueryContext(ctx, `SELECT id FROM sandboxes WHERE reason = ?`, reason)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			rows.Scan(&id)
			if !got[id] {
				t.Fatalf("round %d: %s was stopped but not reported", round, id)
			}
			delete(got, id)
		}
		rows.Close()
		if len(got) > 0 {
			t.Fatalf("round %d: reported but not stopped: %v", round, got)
		}
	}
}

// A row whose JSON columns do not decode is an error, not a sandbox with
// its labels silently dropped.
func TestStoreDecodeErrors(t *testing.T) {
	t.Parallel()
	st, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.InsertSandbox(ctx, &Record{ID: "sb-1", Tenant: "t", Backend: "fake", Spec: []byte("{}"), State: StateRunning, Labels: map[string]string{"a": "b"}, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.db.ExecContext(ctx, `UPDATE sandboxes SET labels = '{not json' WHERE id = 'sb-1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSandbox(ctx, "t", "sb-1"); err == nil {
		t.Error("GetSandbox of a row with broken labels: no error")
	}
	if _, err := st.ListSandboxes(ctx, ListFilter{Tenant: "t"}); err == nil {
		t.Error("ListSandboxes with a broken row: no error")
	}
	if _, err := st.db.ExecContext(ctx, `INSERT INTO events (sandbox, time, type, message, fields) VALUES ('sb-1', 1, 'exec', '', '{broken')`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Events(ctx, "sb-1", 0, 10); err == nil {
		t.Error("Events with a broken row: no error")
	}
}
