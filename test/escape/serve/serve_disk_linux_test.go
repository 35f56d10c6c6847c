package serve

// Issue 24: a tenant's disk quota (serve quota set --max-disk) bounds
// what it holds on the server's disk through every door: sandboxes'
// disks (live and paused), snapshots, named volumes and uploads. Runs in
// TestServeAttacks (costAttacks), against the same real `airlock serve`.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// diskPolicy asks a 64 MiB disk (the harness ceilings' default, said
// out loud so the arithmetic below does not depend on it).
var diskPolicy = []byte(`{"limits": {"disk": "64Mi"}}`)

// entries counts what dir holds (0 when it does not exist).
func entries(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(es)
}

// dataLeft is the count of sandbox volumes, snapshots and named volumes
// in the server's data directory: a refusal must leave it as it was.
func (h *serveHarness) dataLeft(t *testing.T) string {
	return fmt.Sprintf("volumes %d, snapshots %d, named volumes %d",
		entries(t, filepath.Join(h.data, "volumes")), entries(t, filepath.Join(h.data, "snapshots")), entries(t, filepath.Join(h.data, "named-volumes")))
}

func createDisk(c *client.Client) (*api.Sandbox, error) {
	return c.Create(context.Background(), api.CreateSandboxRequest{Policy: diskPolicy})
}

func attackDiskQuota(h *serveHarness, t *testing.T, r *serveResult) {
	ctx := context.Background()
	// Proof: a tenant without a disk quota holds 3 x 64 MiB of disks, more
	// than the 160 MiB dave is given below.
	erin := h.tenant("erin", "127.0.0.5")
	var proof []string
	for range 3 {
		sb, err := createDisk(erin)
		must(t, err)
		proof = append(proof, sb.ID)
	}
	r.Proof = fmt.Sprintf("without a disk quota tenant erin holds %d sandboxes of 64 MiB of disk (192 MiB)", len(proof))
	for _, id := range proof {
		must(t, erin.Delete(ctx, id))
	}

	h.quota("dave", "--max-disk", "160Mi")
	dave := h.tenant("dave", "127.0.0.4")
	a, err := createDisk(dave)
	must(t, err)
	defer dave.Delete(ctx, a.ID)
	b, err := createDisk(dave)
	must(t, err)
	before := h.dataLeft(t)
	_, err = createDisk(dave)
	r.Evidence = "a third 64 MiB sandbox (192 of 160 MiB): " + wantRefused(t, "a create past max_disk", err, 429, "max_disk")
	if after := h.dataLeft(t); after != before {
		t.Errorf("the refused create left files: before %s, after %s", before, after)
	}
	if list, err := dave.List(ctx, client.ListOptions{}); err != nil || len(list) != 2 {
		t.Errorf("dave's sandboxes after the refused create: %d %v, want 2", len(list), err)
	}

	// A snapshot is bounded as it is copied: 40 MiB of data into 32 MiB left.
	if res, err := dave.Run(ctx, a.ID, "sh", "-c", "head -c 40M /dev/urandom > big"); err != nil || res.Code != 0 {
		t.Fatalf("fill the workspace: %v %+v", err, res)
	}
	_, err = dave.Snapshot(ctx, a.ID, "big")
	r.Evidence += "; a 40 MiB snapshot with 32 MiB left: " + wantRefused(t, "a snapshot past max_disk", err, 429, "max_disk")
	if after := h.dataLeft(t); after != before {
		t.Errorf("the refused snapshot left files: before %s, after %s", before, after)
	}
	if snaps, err := dave.Snapshots(ctx, a.ID); err != nil || len(snaps) != 0 {
		t.Errorf("dave's snapshots after the refused one: %v %v", snaps, err)
	}
	must(t, dave.Delete(ctx, b.ID))
	snap, err := dave.Snapshot(ctx, a.ID, "big")
	if err != nil {
		t.Fatalf("the snapshot once dave has room: %v", err)
	}
	defer dave.DeleteSnapshot(ctx, snap.ID)

	// 64 MiB of disk + ~40 MiB of snapshot held: a 64 MiB volume does not fit.
	before = h.dataLeft(t)
	_, err = dave.CreateVolume(ctx, "big", 64<<20)
	r.Evidence += "; then a 64 MiB volume: " + wantRefused(t, "a volume past max_disk", err, 429, "max_disk")
	if after := h.dataLeft(t); after != before {
		t.Errorf("the refused volume left files: before %s, after %s", before, after)
	}
	// An upload lands on the sandbox's own volume: its 64 MiB bound it.
	free := freeOf(h.dir)
	err = dave.Upload(ctx, a.ID, "/tmp/up", bytes.NewReader(gzipZeros(t, 200<<20)))
	r.Evidence += "; a 200 MiB upload: " + wantRefused(t, "a big upload", err, 507, "limits.disk")
	if took := free - freeOf(h.dir); took > 64<<20 {
		t.Errorf("the upload took %d MiB of the data disk", took>>20)
	}
	// Paused, its disk still counts.
	if _, err := dave.Pause(ctx, a.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	_, err = createDisk(dave)
	r.Evidence += "; a create beside the paused sandbox and the snapshot: " + wantRefused(t, "a create beside a paused sandbox", err, 429, "max_disk")

	// The neighbour is unaffected: bob's sandbox, snapshot and volume.
	sb, err := createDisk(h.bob)
	if err != nil {
		t.Fatalf("bob's create beside dave at his quota: %v", err)
	}
	defer h.bob.Delete(ctx, sb.ID)
	if s, err := h.bob.Snapshot(ctx, sb.ID, ""); err != nil {
		t.Errorf("bob's snapshot: %v", err)
	} else {
		h.bob.DeleteSnapshot(ctx, s.ID)
	}
	if _, err := h.bob.CreateVolume(ctx, "bobs", 64<<20); err != nil {
		t.Errorf("bob's volume: %v", err)
	} else {
		h.bob.DeleteVolume(ctx, "bobs")
	}
	// What dave gives back is his again.
	must(t, dave.Delete(ctx, a.ID))
	must(t, dave.DeleteSnapshot(ctx, snap.ID))
	again, err := createDisk(dave)
	if err != nil {
		t.Errorf("dave's create after freeing his disk: %v", err)
	} else {
		dave.Delete(ctx, again.ID)
	}
	r.Evidence += "; bob's create, snapshot and volume succeed; once dave deletes, he may create again"
	r.Verdict = "bounded"
}
