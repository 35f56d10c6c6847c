package microvm

import (
	"context"

	"github.com/airlock-dev/airlock/backend/internal/syncback"
	"github.com/airlock-dev/airlock/backend/microvm/guest"
	"github.com/airlock-dev/airlock/sandbox"
)

// Sync writes back what the sandbox changed in its writable host paths
// (shared read-only, with a writable layer in the guest while it runs),
// each change decided by the guard on the host. See sandbox.Syncer.
func (s *vmSandbox) Sync(ctx context.Context) (sandbox.SyncReport, error) {
	if len(s.syncRoots) == 0 {
		return sandbox.SyncReport{}, nil
	}
	if s.Closed() {
		return sandbox.SyncReport{}, s.ClosedErr("sync")
	}
	// A root whose writable layer is empty has no change: one listing
	// instead of a walk of the tree inside.
	var roots []string
	for _, r := range s.syncRoots {
		if l, ok := s.syncLayers[r]; ok {
			if ents, err := s.Client.Files().List(ctx, l); err == nil && len(ents) == 0 {
				continue
			}
		}
		roots = append(roots, r)
	}
	if len(roots) == 0 {
		return sandbox.SyncReport{}, nil
	}
	return syncback.Run(ctx, s.Client, syncback.Sandbox{
		ID: s.ID(), Agent: guest.AgentPath, Roots: roots, Inside: s.syncInside, Skip: s.syncSkip, Guard: s.guard,
		UID: s.uid, GID: s.gid, Started: s.started, Audit: s.Audit, Log: s.Log,
	})
}
