package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
)

// TestDiskReservationsNeverOverlap: a tenant's concurrent reservations
// (volumes, snapshots under way) never fit into the same bytes, also
// while others turn theirs into stored rows; once all end, exactly the
// stored rows count (nothing leaks); another tenant's quota is its own.
// The store and the quota are real; no backend is involved.
func TestDiskReservationsNeverOverlap(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ts.store.SetQuota(ctx, "dave", store.Quota{MaxDisk: 100}))
	must(ts.store.SetQuota(ctx, "bob", store.Quota{MaxDisk: 10}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	got, refused := 0, 0
	var held []func()
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, release, err := ts.srv.reserveDisk(ctx, "dave", 10, true, "test")
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, sandbox.ErrLimit) {
				refused++
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			got++
			// Half of them become stored volumes, then end their
			// reservation (the row counts now); the others hold theirs.
			if i%2 == 0 {
				if err := ts.store.InsertVolume(ctx, &store.VolumeRecord{ID: fmt.Sprintf("vol-%d", i), Tenant: "dave", Name: fmt.Sprintf("v%d", i), Size: 10, CreatedAt: time.Now()}); err != nil {
					t.Error(err)
				}
				release()
				return
			}
			held = append(held, release)
		}()
	}
	wg.Wait()
	for _, release := range held {
		release()
	}
	// A row stored before its reservation ends counts twice for that
	// moment (never zero times): a concurrent one may be refused, never
	// let in past the quota.
	if got > 10 || got == 0 || got+refused != 30 {
		t.Fatalf("30 reservations of 10 of 100 bytes: %d fit, %d refused; want at most 10 to fit", got, refused)
	}
	stored, err := ts.store.StoredDisk(ctx, "dave")
	must(err)
	left, release, err := ts.srv.reserveDisk(ctx, "dave", 0, false, "test")
	if stored == 100 {
		if !errors.Is(err, sandbox.ErrLimit) {
			t.Fatalf("dave's stored volumes fill his quota; another reservation: %d %v", left, err)
		}
	} else if err != nil || left != 100-stored {
		t.Fatalf("what is left of dave's quota with %d stored: %d %v, want %d", stored, left, err, 100-stored)
	} else {
		release()
	}
	if n, release, err := ts.srv.reserveDisk(ctx, "bob", 0, false, "test"); err != nil || n != 10 {
		t.Fatalf("bob's quota beside dave's: %d %v", n, err)
	} else {
		release()
	}
	if n, _, err := ts.srv.reserveDisk(ctx, "erin", 1<<40, true, "test"); err != nil || n != -1 {
		t.Fatalf("a tenant without a disk quota: %d %v, want -1 (no bound)", n, err)
	}
}

// BenchmarkReserve is one sandbox's quota reservation and release, with
// and without a disk quota (which reads the tenant's volumes and
// snapshots from the store under its lock).
func BenchmarkReserve(b *testing.B) {
	ts := newTestServer(b, func(c *Config) { c.DiskQuota = DiskQuotaVolume })
	ctx := context.Background()
	for i := range 20 {
		if err := ts.store.InsertVolume(ctx, &store.VolumeRecord{ID: fmt.Sprintf("vol-%d", i), Tenant: "dave", Name: fmt.Sprintf("v%d", i), Size: 1 << 20, CreatedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []store.Quota{{MaxMemory: 1 << 40}, {MaxMemory: 1 << 40, MaxDisk: 1 << 40}} {
		b.Run(fmt.Sprintf("max_disk=%v", q.MaxDisk > 0), func(b *testing.B) {
			if err := ts.store.SetQuota(ctx, "dave", q); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				release, err := ts.srv.reserve(ctx, "dave", "native", charge{memory: 1 << 20, disk: 64 << 20}, "")
				if err != nil {
					b.Fatal(err)
				}
				release()
			}
		})
	}
}
