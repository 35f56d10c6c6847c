package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlock-dev/airlock/internal/volume"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server/store"
)

// A tenant's disk quota (store.Quota.MaxDisk, `serve quota set
// --max-disk`) bounds what it holds on the server's disk. Everything a
// tenant can make the server write lands in one of three places, each
// counted by what it may take, before it is made:
//   - a sandbox's disk volume, live or paused, by its size (limits.disk):
//     its workspace, writable layer, checkpoints, upload spools and exec
//     output spills all live on it, so the volume's size bounds them;
//   - a named volume, by its size;
//   - a snapshot, by the blocks its copy takes on the data disk, bounded
//     as it is copied by what the quota has left.
// Sandboxes and copies under way are counted in memory (usage); volumes
// and snapshots in the store. A tenant's lock (Server.disks) is held from
// reading the store to counting the new charge, and a copy's reservation
// is dropped only after its row is stored, under the same lock: two
// requests of one tenant never both fit into the same bytes.

// charge is what one sandbox counts against its tenant's quota.
type charge struct{ memory, disk int64 }

// hold is what a paused sandbox keeps counting.
type hold struct{ memory, disk int64 }

// chargeOf is what a sandbox of pol counts.
func (s *Server) chargeOf(pol *policy.Policy) charge {
	return charge{memory: int64(pol.Limits.Memory), disk: s.diskCharge(pol)}
}

// diskCharge is the disk a sandbox of pol may take: its volume's size
// (makeDisk's: at least volume.MinSize); 0 without a volume (nothing
// bounds it then, which a disk quota refuses).
func (s *Server) diskCharge(pol *policy.Policy) int64 {
	size := int64(pol.Limits.DiskBytes)
	if s.cfg.DiskQuota != DiskQuotaVolume || size <= 0 {
		return 0
	}
	return max(size, volume.MinSize)
}

// storedDisk is what tenant holds outside sandboxes (volumes,
// snapshots), read with tenant's disk lock held, which unlock releases;
// 0 and nothing held when q sets no disk quota.
func (s *Server) storedDisk(ctx context.Context, tenant string, q store.Quota) (int64, func(), error) {
	if q.MaxDisk <= 0 {
		return 0, func() {}, nil
	}
	unlock := s.disks.lock(tenant)
	n, err := s.store.StoredDisk(ctx, tenant)
	if err != nil {
		unlock()
		return 0, nil, err
	}
	return n, unlock, nil
}

// checkDiskQuota refuses a sandbox needing need bytes of disk when
// tenant already holds used of q's MaxDisk.
func (s *Server) checkDiskQuota(tenant string, q store.Quota, used, need int64) error {
	if q.MaxDisk <= 0 {
		return nil
	}
	if s.cfg.DiskQuota != DiskQuotaVolume {
		return fmt.Errorf("create sandbox: tenant %q has a disk quota (max_disk %d bytes), and this server cannot bound a sandbox's disk (serve --disk-quota none): %w", tenant, q.MaxDisk, sandbox.ErrLimit)
	}
	if need == 0 {
		return fmt.Errorf("create sandbox: tenant %q has a disk quota (max_disk), the policy sets no disk limit (limits.disk): %w", tenant, sandbox.ErrLimit)
	}
	if used+need > q.MaxDisk {
		return fmt.Errorf("create sandbox: tenant %q would hold %d of its %d bytes of disk (max_disk: its sandboxes' limits.disk, paused ones too, its volumes and snapshots; this one asks %d): %w",
			tenant, used+need, q.MaxDisk, need, sandbox.ErrLimit)
	}
	return nil
}

// reserveDisk reserves up to want bytes of tenant's disk quota for a copy
// under way (what, in errors): exactly want when exact, else as much as
// is left, at most want (want <= 0: all that is left). It returns the
// bytes the copy may take (-1: no quota bounds it) and the release to
// call once the copy's row is stored or the copy is undone. The quota
// refuses with nothing left (or less than want, when exact).
func (s *Server) reserveDisk(ctx context.Context, tenant string, want int64, exact bool, what string) (int64, func(), error) {
	q, err := s.quotaOf(ctx, tenant)
	if err != nil {
		return 0, nil, err
	}
	if q.MaxDisk <= 0 {
		return -1, func() {}, nil
	}
	stored, unlock, err := s.storedDisk(ctx, tenant, q)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.usageOf(tenant)
	used := stored + u.disk + u.pending
	for _, h := range u.paused {
		used += h.disk
	}
	left := q.MaxDisk - used
	got := left
	if want > 0 {
		got = min(want, left)
	}
	if got <= 0 || (exact && got < want) {
		return 0, nil, fmt.Errorf("%s: tenant %q holds %d of its %d bytes of disk (max_disk: its sandboxes' limits.disk, paused ones too, its volumes and snapshots), this needs %d more: %w",
			what, tenant, used, q.MaxDisk, max(want, 1), sandbox.ErrLimit)
	}
	u.pending += got
	var once bool
	return got, func() {
		unlock := s.disks.lock(tenant)
		defer unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !once {
			once = true
			u.pending -= got
		}
	}, nil
}

// pausedDisk is what paused sandbox id holds of its tenant's disk quota
// after a restart: its volume's size (an image's apparent size is the
// size it was made with); 0 without one.
func (s *Server) pausedDisk(id string) int64 {
	fi, err := os.Stat(filepath.Join(s.cfg.DataDir, "volumes", id+".img"))
	if err != nil {
		return 0
	}
	return fi.Size()
}
