package client_test

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
)

// Against a real sandbox, the answers name the problem: a directory as
// the file to write, protected workspace configuration (403 with the rule,
// not the EBUSY or ENOTDIR of the backend's pinning).
func TestE2EMessagesNameTheProblem(t *testing.T) {
	c := requireNative(t).client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "native"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), sb.ID) })
	ws := sb.Workdir
	if err := c.Mkdir(ctx, sb.ID, path.Join(ws, "a/b/c"), 0o755, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		err  error
		kind error
		want string
	}{
		{"PUT a directory", c.WriteFile(ctx, sb.ID, "/tmp", strings.NewReader("x"), 0), errdefs.ErrInvalid, "is a directory"},
		{"write .git/hooks", c.WriteFile(ctx, sb.ID, path.Join(ws, ".git/hooks/pre-commit"), strings.NewReader("x"), 0o755), errdefs.ErrPermission, "refused by rule git-hooks"},
		{"write .vscode/tasks.json", c.WriteFile(ctx, sb.ID, path.Join(ws, ".vscode/tasks.json"), strings.NewReader("{}"), 0), errdefs.ErrPermission, "refused by rule editor"},
		{"write a/b/c/.envrc", c.WriteFile(ctx, sb.ID, path.Join(ws, "a/b/c/.envrc"), strings.NewReader("x"), 0), errdefs.ErrPermission, "refused by rule envrc"},
	} {
		if !errors.Is(tc.err, tc.kind) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v and %q", tc.what, tc.err, tc.kind, tc.want)
		}
	}
}

// TestE2EPlantedConfigRefused: through the API's exec door, a sandbox
// cannot plant code a host program would run (a hook in a nested
// repository at depth 1 and 3, a set-uid file) in its workspace, which
// lives in the server's data directory.
func TestE2EPlantedConfigRefused(t *testing.T) {
	c := requireNative(t).client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: "native"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), sb.ID) })
	ws := sb.Workdir
	for _, d := range []string{"a", "a/b/c"} {
		res, err := c.Run(ctx, sb.ID, "sh", "-c", "cd "+ws+" && mkdir -p "+d+"/.git/hooks && echo evil > "+d+"/.git/hooks/pre-commit; echo $?")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(res.Stdout)) == "0" {
			t.Errorf("depth %s: hook planted through exec: %s", d, res.Stderr)
		}
	}
	res, err := c.Run(ctx, sb.ID, "sh", "-c", "cd "+ws+" && cp /bin/true tool && chmod 4755 tool; echo $?")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(res.Stdout)) == "0" {
		t.Errorf("set-uid file through exec: %s", res.Stderr)
	}
	for _, p := range []string{"a/.git/hooks/pre-commit", "a/b/c/.git/hooks/pre-commit"} {
		if _, err := c.Stat(ctx, sb.ID, path.Join(ws, p)); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	if fi, err := c.Stat(ctx, sb.ID, path.Join(ws, "tool")); err == nil && fi.Mode&fs.ModeSetuid != 0 {
		t.Errorf("tool is set-uid: %v", fi.Mode)
	}
}
