package writeback

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

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// maxListing bounds the sandbox's listing of one synced tree.
const maxListing = 256 << 20

// Inside is how Sync reaches into a sandbox: Exec runs Walker (the airlock
// binary inside) as `Walker __walk ROOT`, Files reads the contents.
type Inside struct {
	Exec   func(context.Context, sandbox.ExecRequest) (sandbox.Process, error)
	Files  sandbox.Files
	Walker string
}

// SyncConfig is what Sync writes back and under which rules.
type SyncConfig struct {
	Roots    []string // host paths the sandbox sees at the same place
	Skip     []string // the sandbox's own mounts below them (never synced)
	Guard    *policy.ConfigGuard
	UID, GID int   // owner of what is written back (-1: unchanged)
	Since    int64 // when the sandbox started (UnixNano): host changes after it are conflicts
	Report   func(policy.Denial)
}

// Sync writes back what the sandbox changed in each root: the listing
// inside (untrusted) against the host's, each change decided by the guard.
// It is what an overlay-backed sandbox's Sync (sandbox.Syncer) does.
func Sync(ctx context.Context, in Inside, c SyncConfig) (sandbox.SyncReport, error) {
	var rep sandbox.SyncReport
	var errs []error
	for _, root := range c.Roots {
		r, err := syncRoot(ctx, in, c, root)
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

func syncRoot(ctx context.Context, in Inside, c SyncConfig, root string) (Result, error) {
	var out limitBuffer
	out.max = maxListing
	var errOut bytes.Buffer
	p, err := in.Exec(ctx, sandbox.ExecRequest{Args: []string{in.Walker, "__walk", root}, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return Result{}, fmt.Errorf("list %s inside: %w", root, err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Code != 0 || out.over {
		return Result{}, fmt.Errorf("list %s inside: exit %d, %v: %s", root, st.Code, err, strings.TrimSpace(errOut.String()))
	}
	inside, err := ReadEntries(&out.buf)
	if err != nil {
		return Result{}, err
	}
	host, err := List(root)
	if err != nil {
		return Result{}, err
	}
	skip := func(rel string) bool {
		full := path.Join(root, rel)
		for _, s := range c.Skip {
			if full == s || strings.HasPrefix(full, s+"/") {
				return true
			}
		}
		return false
	}
	changes := Plan(inside, host, skip)
	uid, gid := c.UID, c.GID
	if os.Geteuid() != 0 {
		uid, gid = -1, -1
	}
	return Apply(Target{
		Root: root, Guard: c.Guard, UID: uid, GID: gid, Since: c.Since,
		Open:   func(rel string) (io.ReadCloser, error) { return in.Files.ReadFile(ctx, path.Join(root, rel)) },
		Report: c.Report,
	}, host, changes), nil
}

// AuditDenials is a SyncConfig.Report that logs each refusal and emits it
// as a denied audit event of sandbox id.
func AuditDenials(log *slog.Logger, sink audit.Sink, id string) func(policy.Denial) {
	return func(d policy.Denial) {
		log.Info("write-back refused", "rule", d.Rule, "op", d.Op, "path", d.Path)
		sink.Emit(audit.Event{Sandbox: id, Type: audit.TypeDenied, Message: d.Op + " " + d.Path + ": refused by rule " + d.Rule,
			Fields: map[string]any{"rule": d.Rule, "op": d.Op, "path": d.Path}})
	}
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
