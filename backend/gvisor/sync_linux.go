package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/internal/writeback"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// maxListing bounds the sandbox's listing of one synced tree.
const maxListing = 256 << 20

// Sync writes back what the sandbox changed in its host paths (they sit in
// an overlay while it runs): the airlock binary inside lists each tree,
// the host compares it with its own and makes each change after the
// guard allowed it, reading contents through the agent. It reports
// refusals as denied events. See sandbox.Syncer.
func (s *gvSandbox) Sync(ctx context.Context) (sandbox.SyncReport, error) {
	var rep sandbox.SyncReport
	if len(s.syncRoots) == 0 {
		return rep, nil
	}
	if s.closed.Load() {
		return rep, s.errClosed("sync")
	}
	var errs []error
	for _, root := range s.syncRoots {
		r, err := s.syncRoot(ctx, root)
		rep.Applied += r.Applied
		rep.Denied += r.Denied
		rep.Conflicts = append(rep.Conflicts, r.Conflicts...)
		for _, e := range r.Errors {
			errs = append(errs, errors.New(e))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("sandbox %q: write back: %w", s.id, errors.Join(errs...))
	}
	return rep, nil
}

func (s *gvSandbox) syncRoot(ctx context.Context, root string) (writeback.Result, error) {
	var out limitBuffer
	out.max = maxListing
	var errOut bytes.Buffer
	in := root // where the sandbox sees it
	if v, ok := s.syncInside[root]; ok {
		in = v
	}
	p, err := s.client.Exec(ctx, sandbox.ExecRequest{Args: []string{AgentPath, "__walk", in}, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return writeback.Result{}, fmt.Errorf("list %s inside: %w", root, err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Code != 0 || out.over {
		return writeback.Result{}, fmt.Errorf("list %s inside: exit %d, %v: %s", root, st.Code, err, strings.TrimSpace(errOut.String()))
	}
	inside, err := writeback.ReadEntries(&out.buf)
	if err != nil {
		return writeback.Result{}, err
	}
	host, err := writeback.List(root)
	if err != nil {
		return writeback.Result{}, err
	}
	skip := func(rel string) bool { return hostfs.Under(path.Join(in, rel), s.syncSkip) }
	changes := writeback.Plan(inside, host, skip)
	uid, gid := s.uid, s.gid
	if os.Geteuid() != 0 {
		uid, gid = -1, -1
	}
	files := s.client.Files()
	res := writeback.Apply(writeback.Target{
		Root: root, Guard: s.guard, UID: uid, GID: gid, Since: s.started.UnixNano(),
		Open: func(rel string) (io.ReadCloser, error) { return files.ReadFile(ctx, path.Join(in, rel)) },
		Report: func(d policy.Denial) {
			s.log.Info("write-back refused", "rule", d.Rule, "op", d.Op, "path", d.Path)
			s.audit.Emit(audit.Event{Sandbox: s.id, Type: audit.TypeDenied, Message: d.Op + " " + d.Path + ": refused by rule " + d.Rule,
				Fields: map[string]any{"rule": d.Rule, "op": d.Op, "path": d.Path}})
		},
	}, host, changes)
	s.log.Debug("wrote back", "root", root, "changes", len(changes), "applied", res.Applied, "denied", res.Denied, "conflicts", len(res.Conflicts))
	return res, nil
}

// limitBuffer keeps up to max bytes and notes when more came.
type limitBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	if l.buf.Len()+len(p) > l.max {
		l.over = true
		return 0, errors.New("listing too large")
	}
	return l.buf.Write(p)
}
