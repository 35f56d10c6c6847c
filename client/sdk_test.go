package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/errdefs"
)

// The SDK's calls one by one, with commands both backends have (echo, cat,
// sleep, true): against a real sandbox in CI, against the fake backend on
// a laptop.
func TestSDKBasics(t *testing.T) {
	c := shared.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Labels: map[string]string{"sdk": "basics"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), sb.ID) })
	if l, err := c.List(ctx, client.ListOptions{Labels: map[string]string{"sdk": "basics"}}); err != nil || len(l) != 1 || l[0].ID != sb.ID {
		t.Fatalf("list by label: %v %+v", err, l)
	}

	// Buffered, streamed and with stdin.
	r, err := c.Run(ctx, sb.ID, "echo", "hello")
	if err != nil || r.Code != 0 || string(r.Stdout) != "hello\n" {
		t.Fatalf("run: %v %+v", err, r)
	}
	var out bytes.Buffer
	ex, err := c.Exec(ctx, sb.ID, client.ExecOptions{Args: []string{"cat"}, Stdin: strings.NewReader("in and out\n"), Stdout: &out})
	if err != nil || ex.Code != 0 || out.String() != "in and out\n" {
		t.Fatalf("exec with stdin: %v %+v %q", err, ex, out.String())
	}
	if r, err := c.Run(ctx, sb.ID, "false"); err != nil || r.Code != 1 {
		t.Fatalf("false: %v %+v", err, r)
	}

	// Kinds across the wire, by code.
	if _, err := c.Run(ctx, sb.ID, "no-such-command"); !errors.Is(err, errdefs.ErrCommandNotFound) {
		t.Fatalf("missing command: %v", err)
	}
	if _, err := c.Run(ctx, "sb-nope", "true"); !errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrCommandNotFound) {
		t.Fatalf("missing sandbox: %v", err)
	}
	if _, err := c.Get(ctx, ""); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("empty ID: %v", err)
	}

	// A background process: list, kill, wait.
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := c.Processes(ctx, sb.ID); err != nil || len(ps) != 1 || !ps[0].Running {
		t.Fatalf("processes: %v %+v", err, ps)
	}
	if err := c.Kill(ctx, sb.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Process(ctx, sb.ID, p.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a killed process is forgotten: %v", err)
	}

	// Files.
	if err := c.Mkdir(ctx, sb.ID, "/tmp/sdk/dir", 0o755, true); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, sb.ID, "/tmp/sdk/dir/f.txt", strings.NewReader("content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, sb.ID, "/tmp/sdk/dir/f.txt", "/tmp/sdk/dir/g.txt"); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, sb.ID, "/tmp/sdk/dir/g.txt")
	if err != nil || fi.Size != 7 || fi.Mode.Perm() != 0o600 || fi.IsDir {
		t.Fatalf("stat: %v %+v", err, fi)
	}
	if l, err := c.ListDir(ctx, sb.ID, "/tmp/sdk/dir"); err != nil || len(l) != 1 || l[0].Name != "g.txt" {
		t.Fatalf("list dir: %v %+v", err, l)
	}
	rc, err := c.ReadFile(ctx, sb.ID, "/tmp/sdk/dir/g.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "content" {
		t.Fatalf("read back %q", b)
	}
	if err := c.Remove(ctx, sb.ID, "/tmp/sdk", true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, sb.ID, "/tmp/sdk"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("after remove: %v", err)
	}

	// A terminal whose input ends.
	pty, err := c.PTY(ctx, sb.ID, client.PTYOptions{Args: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pty.Close()
	pty.Write([]byte("typed\n"))
	pty.CloseWrite()
	screen, _ := io.ReadAll(pty)
	if ex, err := pty.Wait(ctx); err != nil || ex.Code != 0 || !strings.Contains(string(screen), "typed") {
		t.Fatalf("pty: %v %+v %q", err, ex, screen)
	}

	// Audit events of what we did.
	evs, err := c.Events(ctx, sb.ID, 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %v %d", err, len(evs))
	}
}
