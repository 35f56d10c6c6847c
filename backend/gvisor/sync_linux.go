package gvisor

import (
	"context"

	"github.com/airlock-dev/airlock/backend/internal/syncback"
	"github.com/airlock-dev/airlock/sandbox"
)

// Sync writes back what the sandbox changed in its host paths (they sit in
// an overlay while it runs): the airlock binary inside lists each tree,
// the host compares it with its own and makes each change after the
// guard allowed it, reading contents through the agent. It reports
// refusals as denied events. See sandbox.Syncer.
func (s *gvSandbox) Sync(ctx context.Context) (sandbox.SyncReport, error) {
	if len(s.syncRoots) == 0 {
		return sandbox.SyncReport{}, nil
	}
	if s.Closed() {
		return sandbox.SyncReport{}, s.ClosedErr("sync")
	}
	uid, gid := s.uid, s.gid
	if s.lease != nil {
		// What is written back belongs to the sandbox's user as the host
		// knows it: inside its leased range.
		uid, gid = s.lease.UID+uid, s.lease.GID+gid
	}
	return syncback.Run(ctx, s.Client, syncback.Sandbox{
		ID: s.ID(), Agent: AgentPath, Roots: s.syncRoots, Inside: s.syncInside, Skip: s.syncSkip, Guard: s.guard, UID: uid, GID: gid,
		Started: s.started, Audit: s.Audit, Log: s.Log,
	})
}
