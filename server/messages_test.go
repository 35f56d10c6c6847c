package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
)

// Answers that name the real problem, with the kind that fits it.
func TestMessagesSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.local(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, kind error, want ...string) {
		t.Helper()
		if !errors.Is(err, kind) {
			t.Errorf("%s: %v, want kind %v", what, err, kind)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", what, err.Error(), w)
			}
		}
		if strings.Contains(err.Error(), ".airlock-upload-") || strings.Contains(err.Error(), "sandbox closed") {
			t.Errorf("%s: misleading %q", what, err.Error())
		}
	}
	// A set-uid mode was reported as "-rwxr-xr-x has more than permission bits".
	check("mode 4755", rawWrite(t, ts, sb.ID, "/tmp/f", "4755"), errdefs.ErrInvalid, "4755", "set-uid")
	if err := c.WriteFile(ctx, sb.ID, "/tmp/f", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	// A directory as the file to write answered 403 about a hidden sibling.
	check("PUT a directory", c.WriteFile(ctx, sb.ID, "/tmp", strings.NewReader("x"), 0), errdefs.ErrInvalid, `"/tmp": is a directory`)
	// A trailing slash silently wrote a file named like the directory.
	check("PUT dir/", c.WriteFile(ctx, sb.ID, "/tmp/newdir/", strings.NewReader("x"), 0), errdefs.ErrInvalid, "ends with")
	if _, err := c.Stat(ctx, sb.ID, "/tmp/newdir"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("PUT /tmp/newdir/ made /tmp/newdir: %v", err)
	}
	// Input for a process that has exited said "sandbox closed".
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"true"}, Stdin: strings.NewReader("")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, sb.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	check("stdin after exit", c.WriteStdin(ctx, sb.ID, p.ID, strings.NewReader("late"), true), errdefs.ErrNotFound, "has exited")
	// An empty ID was a 405 (or another route).
	check("empty ID", c.Delete(ctx, ""), errdefs.ErrInvalid, "empty")
	for _, m := range [][2]string{{"DELETE", "/v1/sandboxes/"}, {"POST", "/v1/sandboxes//exec"}, {"GET", "/v1/sandboxes//files?path=/x"}} {
		if code := rawStatus(t, ts, m[0], m[1]); code != http.StatusBadRequest {
			t.Errorf("%s %s: %d, want 400", m[0], m[1], code)
		}
	}
	// Protected workspace configuration: 403 naming the rule, whatever the
	// backend's pinning would answer.
	ws := sb.Workdir // the workspace where the sandbox sees it (/workspace)
	check("write .git/hooks", c.WriteFile(ctx, sb.ID, path.Join(ws, ".git/hooks/pre-commit"), strings.NewReader("x"), 0), errdefs.ErrPermission, ".git/hooks", "git runs hooks")
	check("mkdir .git/hooks", c.Mkdir(ctx, sb.ID, path.Join(ws, ".git/hooks/x"), 0, true), errdefs.ErrPermission, ".git/hooks")
	check("rename onto .vscode/settings.json", c.Rename(ctx, sb.ID, "/tmp/f", path.Join(ws, "a/.vscode/settings.json")), errdefs.ErrPermission, ".vscode", "editor")
	check("rename onto .envrc", c.Rename(ctx, sb.ID, "/tmp/f", path.Join(ws, ".envrc")), errdefs.ErrPermission, ".envrc", "direnv")
	if err := c.WriteFile(ctx, sb.ID, path.Join(ws, "notes.txt"), strings.NewReader("x"), 0); err != nil {
		t.Errorf("an ordinary workspace file: %v", err)
	}
}

func rawStatus(t *testing.T, ts *testServer, method, p string) int {
	t.Helper()
	resp, _ := rawDo(t, ts, method, p, "application/json", strings.NewReader(`{"args":["true"]}`))
	return resp.StatusCode
}

// rawWrite PUTs a file with a raw mode string (the SDK only sends
// permission bits).
func rawWrite(t *testing.T, ts *testServer, id, p, mode string) error {
	t.Helper()
	resp, b := rawDo(t, ts, "PUT", "/v1/sandboxes/"+id+"/files?path="+p+"&mode="+mode, "", strings.NewReader("x"))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var eb api.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil {
		t.Fatalf("error answer %s: %v", b, err)
	}
	return &client.Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
}
