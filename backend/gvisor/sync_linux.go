package gvisor

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/internal/writeback"
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
	if s.closed.Load() {
		return sandbox.SyncReport{}, s.errClosed("sync")
	}
	rep, err := writeback.Sync(ctx, writeback.Inside{Exec: s.client.Exec, Files: s.client.Files(), Walker: AgentPath}, writeback.SyncConfig{
		Roots: s.syncRoots, Skip: s.syncSkip, Guard: s.guard, UID: s.uid, GID: s.gid, Since: s.started.UnixNano(),
		Report: writeback.AuditDenials(s.log, s.audit, s.id),
	})
	if err != nil {
		return rep, fmt.Errorf("sandbox %q: write back: %w", s.id, err)
	}
	return rep, nil
}
