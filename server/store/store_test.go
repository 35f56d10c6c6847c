package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
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

// TestDiskQuotaAndStoredDisk: max_disk round-trips with the other quota
// fields, and a tenant's stored disk is its volumes' sizes plus its
// snapshots' stored bytes (not their logical sizes), no one else's.
func TestDiskQuotaAndStoredDisk(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	want := Quota{MaxSandboxes: 3, MaxMemory: 1 << 30, MaxDisk: 5 << 30}
	if err := st.SetQuota(ctx, "dave", want); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetQuota(ctx, "dave"); err != nil || got != want {
		t.Fatalf("quota: %+v %v, want %+v", got, err, want)
	}
	for i, tenant := range []string{"dave", "dave", "bob"} {
		v := &VolumeRecord{ID: fmt.Sprintf("vol-%d", i), Tenant: tenant, Name: fmt.Sprintf("v%d", i), Size: 100 << 20, CreatedAt: time.Now()}
		if err := st.InsertVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	snap := &SnapRow{Snapshot: api.Snapshot{ID: "snap-1", Sandbox: "sb-1", Backend: "native", Bytes: 2 << 40, CreatedAt: time.Now()},
		Tenant: "dave", Request: []byte("{}"), Disk: 7 << 20}
	if err := st.InsertSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if got, err := st.StoredDisk(ctx, "dave"); err != nil || got != 200<<20+7<<20 {
		t.Fatalf("dave's stored disk: %d %v, want %d", got, err, 200<<20+7<<20)
	}
	if got, err := st.StoredDisk(ctx, "bob"); err != nil || got != 100<<20 {
		t.Fatalf("bob's stored disk: %d %v", got, err)
	}
	if got, _ := st.GetSnapshot(ctx, "dave", "snap-1"); got == nil || got.Disk != 7<<20 {
		t.Fatalf("the snapshot's stored bytes: %+v", got)
	}
}
