// Package syncback is the write-back step shared by the backends whose
// sandboxes write host paths into an overlay (gVisor's, Docker's overlay
// volumes): the airlock binary inside lists the tree, the host compares it
// with its own and makes each change only after policy.ConfigGuard allowed
// it, reading contents through the sandbox's file API (internal/writeback
// does the planning and the guarded writes). It must never trust the
// listing beyond its bounds, nor write anything the guard refused.
package syncback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/internal/writeback"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// maxListing bounds the sandbox's listing of one synced tree.
const maxListing = 256 << 20

// Inside is what a sync needs of the sandbox: a process (the listing) and
// its files (the contents).
type Inside interface {
	Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error)
	Files() sandbox.Files
}

// Tree is one host path to bring back.
type Tree struct {
	Agent    string   // the airlock binary's path inside (runs `__walk`)
	Root     string   // the host path
	In       string   // where the sandbox sees Root ("": at Root)
	Skip     []string // the sandbox's own mounts below it (inside paths): never synced
	Guard    *policy.ConfigGuard
	UID, GID int   // owner of what is written back (ignored unless root)
	Since    int64 // when the sandbox started (UnixNano): later host changes are conflicts
	Report   func(policy.Denial)
	Log      *slog.Logger
}

// Sandbox is one sandbox's write-back: the same rules for every root.
type Sandbox struct {
	ID       string
	Agent    string            // the airlock binary's path inside
	Roots    []string          // host paths
	Inside   map[string]string // a root's path inside, when not at its host path
	Skip     []string          // the sandbox's own mounts below them (inside paths)
	Guard    *policy.ConfigGuard
	UID, GID int
	Started  time.Time
	Audit    audit.Sink // refusals become denied events
	Log      *slog.Logger
}

// Run syncs every root of sb (see Sync), reporting each refusal to the
// log and as a denied audit event.
func Run(ctx context.Context, in Inside, sb Sandbox) (sandbox.SyncReport, error) {
	report := func(d policy.Denial) {
		sb.Log.Info("write-back refused", "rule", d.Rule, "op", d.Op, "path", d.Path)
		sb.Audit.Emit(audit.Event{Sandbox: sb.ID, Type: audit.TypeDenied, Message: d.Op + " " + d.Path + ": refused by rule " + d.Rule,
			Fields: map[string]any{"rule": d.Rule, "op": d.Op, "path": d.Path}})
	}
	trees := make([]Tree, 0, len(sb.Roots))
	for _, root := range sb.Roots {
		trees = append(trees, Tree{Agent: sb.Agent, Root: root, In: sb.Inside[root], Skip: sb.Skip, Guard: sb.Guard, UID: sb.UID, GID: sb.GID,
			Since: sb.Started.UnixNano(), Report: report, Log: sb.Log})
	}
	rep, err := Sync(ctx, in, trees)
	if err != nil {
		return rep, fmt.Errorf("sandbox %q: write back: %w", sb.ID, err)
	}
	return rep, nil
}

// Sync brings back what the sandbox changed in each tree, and reports the
// total. Errors of one tree do not stop the others.
func Sync(ctx context.Context, in Inside, trees []Tree) (sandbox.SyncReport, error) {
	var rep sandbox.SyncReport
	var errs []error
	for _, t := range trees {
		r, err := syncTree(ctx, in, t)
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
	return rep, errors.Join(errs...)
}

func syncTree(ctx context.Context, in Inside, t Tree) (writeback.Result, error) {
	out := limitBuffer{max: maxListing}
	var errOut bytes.Buffer
	at := t.In // where the sandbox sees the tree
	if at == "" {
		at = t.Root
	}
	p, err := in.Exec(ctx, sandbox.ExecRequest{Args: []string{t.Agent, "__walk", at}, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return writeback.Result{}, fmt.Errorf("list %s inside: %w", t.Root, err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Code != 0 || out.over {
		return writeback.Result{}, fmt.Errorf("list %s inside: exit %d, %v: %s", t.Root, st.Code, err, strings.TrimSpace(errOut.String()))
	}
	inside, err := writeback.ReadEntries(&out.buf)
	if err != nil {
		return writeback.Result{}, err
	}
	host, err := writeback.List(t.Root)
	if err != nil {
		return writeback.Result{}, err
	}
	skip := func(rel string) bool { return hostfs.Under(path.Join(at, rel), t.Skip) }
	changes := writeback.Plan(inside, host, skip)
	uid, gid := t.UID, t.GID
	if os.Geteuid() != 0 {
		uid, gid = -1, -1
	}
	files := in.Files()
	res := writeback.Apply(writeback.Target{
		Root: t.Root, Guard: t.Guard, UID: uid, GID: gid, Since: t.Since,
		Open:   func(rel string) (io.ReadCloser, error) { return files.ReadFile(ctx, path.Join(at, rel)) },
		Report: t.Report,
	}, host, changes)
	if t.Log != nil {
		t.Log.Debug("wrote back", "root", t.Root, "changes", len(changes), "applied", res.Applied, "denied", res.Denied, "conflicts", len(res.Conflicts))
	}
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
