package client_test

import (
	"context"
	"errors"
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
