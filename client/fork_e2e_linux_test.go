package client_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// TestE2EFork: a fork of a sandbox holding files makes copies that see
// the same tree (modes, symlink, 1 MiB of random bytes) and the source's
// settings (labels, env), and whose changes are their own; the copy is
// reported (method and bytes).
func TestE2EFork(t *testing.T) {
	s := requireNative(t)
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy, Labels: map[string]string{"team": "a"}, Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	runOut(t, c, sb.ID, fillScript)
	before := runOut(t, c, sb.ID, treeScript)
	res, err := c.Fork(ctx, sb.ID, api.ForkRequest{Count: 2, Labels: map[string]string{"copy": "yes"}})
	if err != nil {
		t.Fatalf("fork: %v\n%s", err, s.logText())
	}
	if len(res.Sandboxes) != 2 || res.Copy.Bytes < 1<<20 || res.Copy.Files != 4 || (res.Copy.Method != api.CopyReflink && res.Copy.Method != api.CopyFull) {
		t.Fatalf("fork answer: %+v", res)
	}
	t.Logf("fork of %d files, %d bytes: %s in %d ms", res.Copy.Files, res.Copy.Bytes, res.Copy.Method, res.Copy.Millis)
	for i, f := range res.Sandboxes {
		defer c.Delete(ctx, f.ID)
		if f.ID == sb.ID || f.Labels["team"] != "a" || f.Labels["copy"] != "yes" {
			t.Fatalf("copy %d: %+v", i, f)
		}
		if got := runOut(t, c, f.ID, treeScript); got != before {
			t.Fatalf("copy %d's files differ:\n%s\n%s", i, before, got)
		}
		if env := runOut(t, c, f.ID, `echo "$GREETING"`); env != "hi\n" {
			t.Fatalf("copy %d's env: %q", i, env)
		}
	}
	// Independent: a change in one copy is seen neither in the source nor
	// in the other copy, and one in the source not in the copies.
	runOut(t, c, res.Sandboxes[0].ID, "echo fork0 > /workspace/src/main.py; rm /workspace/big.bin")
	runOut(t, c, sb.ID, "echo source > /workspace/new")
	if got := runOut(t, c, res.Sandboxes[1].ID, treeScript); got != before {
		t.Fatalf("copy 1 saw another's change:\n%s\n%s", before, got)
	}
	if got := runOut(t, c, sb.ID, "cat /workspace/src/main.py; ls /workspace/big.bin"); got != "print(1)\n/workspace/big.bin\n" {
		t.Fatalf("the source saw a copy's change: %q", got)
	}
	if got := runOut(t, c, res.Sandboxes[0].ID, "cat /workspace/src/main.py; ls /workspace"); strings.Contains(got, "new") || !strings.HasPrefix(got, "fork0\n") {
		t.Fatalf("copy 0: %q", got)
	}
	// A fork of a sandbox that does not exist.
	_, err = c.Fork(ctx, "sb-0000000000000000", api.ForkRequest{})
	wantCode(t, "fork of no sandbox", err, 404, api.CodeNotFound)
	_, err = c.Fork(ctx, sb.ID, api.ForkRequest{Count: api.MaxForkCount + 1})
	wantCode(t, "fork of too many", err, 400, api.CodeInvalid)
}

// TestE2ESnapshot: a snapshot keeps a sandbox's files and settings after
// it is deleted; sandboxes made of it (by ID or name) see them, and a
// deleted snapshot is gone with its files.
func TestE2ESnapshot(t *testing.T) {
	s := requireNative(t)
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy, Labels: map[string]string{"team": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	runOut(t, c, sb.ID, fillScript)
	before := runOut(t, c, sb.ID, treeScript)
	snap, err := c.Snapshot(ctx, sb.ID, "snap-test-"+sb.ID)
	if err != nil {
		t.Fatalf("snapshot: %v\n%s", err, s.logText())
	}
	if snap.Sandbox != sb.ID || snap.Files != 4 || snap.Bytes < 1<<20 || snap.Copy.Method == "" {
		t.Fatalf("snapshot: %+v", snap)
	}
	defer c.DeleteSnapshot(ctx, snap.ID)
	_, err = c.Snapshot(ctx, sb.ID, snap.Name)
	wantCode(t, "a second snapshot of the same name", err, 409, api.CodeExists)
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	l, err := c.Snapshots(ctx, sb.ID)
	if err != nil || len(l) != 1 || l[0].ID != snap.ID {
		t.Fatalf("snapshots of %s: %v %+v", sb.ID, err, l)
	}
	for _, ref := range []string{snap.ID, snap.Name} {
		res, err := c.CreateFromSnapshot(ctx, ref, api.ForkRequest{})
		if err != nil {
			t.Fatalf("create from %s: %v\n%s", ref, err, s.logText())
		}
		nb := res.Sandboxes[0]
		if got := runOut(t, c, nb.ID, treeScript); got != before || nb.Labels["team"] != "b" {
			t.Fatalf("sandbox of the snapshot: %+v\n%s\n%s", nb, before, got)
		}
		runOut(t, c, nb.ID, "echo changed > /workspace/src/main.py")
		if err := c.Delete(ctx, nb.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSnapshot(ctx, snap.ID)
	wantCode(t, "get of a deleted snapshot", err, 404, api.CodeNotFound)
	_, err = c.CreateFromSnapshot(ctx, snap.ID, api.ForkRequest{})
	wantCode(t, "create from a deleted snapshot", err, 404, api.CodeNotFound)
	if m, _ := filepath.Glob(filepath.Join(s.data, "snapshots", snap.ID)); len(m) > 0 {
		t.Fatalf("left behind: %v", m)
	}
}

// TestE2EForkAllOrNone: a fork the tenant's sandbox quota cannot hold in
// full fails with 429 and leaves nothing: no sandbox, row or file of the
// copies made before the one that did not fit.
func TestE2EForkAllOrNone(t *testing.T) {
	requireNative(t)
	s, err := startServe(t.TempDir(), "--backend", "native", "--max-sandboxes", "3")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	runOut(t, c, sb.ID, fillScript)
	_, err = c.Fork(ctx, sb.ID, api.ForkRequest{Count: 3})
	wantCode(t, "fork beyond the quota", err, 429, api.CodeLimitExceeded)
	all, err := c.List(ctx, client.ListOptions{All: true})
	if err != nil || len(all) != 1 || all[0].ID != sb.ID {
		t.Fatalf("after a failed fork: %v %+v", err, all)
	}
	for _, pattern := range []string{"volumes/sb-*", "workspaces/sb-*", "layers/sb-*"} {
		m, _ := filepath.Glob(filepath.Join(s.data, pattern))
		for _, p := range m {
			if !strings.Contains(p, sb.ID) {
				t.Errorf("left behind: %s", p)
			}
		}
	}
	// This server's run directory is the one holding the source's volume.
	if src, _ := filepath.Glob("/run/airlock/*/volumes/" + sb.ID); len(src) == 1 {
		if m, _ := filepath.Glob(filepath.Join(filepath.Dir(src[0]), "sb-*")); len(m) != 1 {
			t.Errorf("volumes mounted after a failed fork: %v", m)
		}
	} else {
		t.Errorf("the source's volume: %v", src)
	}
	// What fits is made.
	res, err := c.Fork(ctx, sb.ID, api.ForkRequest{Count: 2})
	if err != nil || len(res.Sandboxes) != 2 {
		t.Fatalf("fork within the quota: %v %+v", err, res)
	}
}

// TestE2EForkOtherTenant: a tenant can neither fork nor snapshot another
// tenant's sandbox, nor see, use or delete its snapshots (404, as for
// ones that do not exist).
func TestE2EForkOtherTenant(t *testing.T) {
	requireNative(t)
	s, err := startServe(t.TempDir(), "--backend", "native", "--listen", freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	ctx := context.Background()
	a, _ := client.New(s.tcpURL(), client.WithAPIKey(s.newKey(t, "alice")))
	b, _ := client.New(s.tcpURL(), client.WithAPIKey(s.newKey(t, "bob")))
	sb, err := a.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatalf("alice creates: %v\n%s", err, s.logText())
	}
	defer a.Delete(ctx, sb.ID)
	snap, err := a.Snapshot(ctx, sb.ID, "mine")
	if err != nil {
		t.Fatalf("alice snapshots: %v\n%s", err, s.logText())
	}
	is404 := func(what string, err error) {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 404 {
			t.Errorf("bob %s: want 404, got %v", what, err)
		}
	}
	_, err = b.Fork(ctx, sb.ID, api.ForkRequest{})
	is404("forks alice's sandbox", err)
	_, err = b.Snapshot(ctx, sb.ID, "")
	is404("snapshots alice's sandbox", err)
	for _, ref := range []string{snap.ID, "mine"} {
		_, err = b.GetSnapshot(ctx, ref)
		is404("gets alice's snapshot", err)
		_, err = b.CreateFromSnapshot(ctx, ref, api.ForkRequest{})
		is404("creates from alice's snapshot", err)
		is404("deletes alice's snapshot", b.DeleteSnapshot(ctx, ref))
	}
	if l, err := b.Snapshots(ctx, ""); err != nil || len(l) != 0 {
		t.Errorf("bob lists snapshots: %v %+v", err, l)
	}
	if l, err := b.List(ctx, client.ListOptions{All: true}); err != nil || len(l) != 0 {
		t.Errorf("bob lists sandboxes: %v %+v", err, l)
	}
	if _, err := a.GetSnapshot(ctx, snap.ID); err != nil {
		t.Fatalf("alice after bob's attempts: %v", err)
	}
}

// TestE2EForkRefusedByOtherBackends: gvisor, docker and wasm sandboxes
// keep their files in their backend, not where the server can copy
// them: fork and snapshot are refused with 501 naming the backend, and
// nothing is made.
func TestE2EForkRefusedByOtherBackends(t *testing.T) {
	requireNative(t)
	for _, bin := range []string{"runsc", "docker"} {
		testutil.RequireBinary(t, bin)
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		testutil.Skip(t, "no docker daemon: "+err.Error())
	}
	s, err := startServe(t.TempDir()) // every backend the host has
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c := s.client(t)
	ctx := context.Background()
	for _, b := range []string{"gvisor", "docker", "wasm"} {
		t.Run(b, func(t *testing.T) {
			sb, err := c.Create(ctx, api.CreateSandboxRequest{Backend: b})
			if err != nil {
				t.Fatalf("create: %v\n%s", err, s.logText())
			}
			defer c.Delete(ctx, sb.ID)
			_, err = c.Fork(ctx, sb.ID, api.ForkRequest{})
			ce := wantCode(t, "fork", err, 501, api.CodeNotSupported)
			if !strings.Contains(ce.Message, "the "+b+" backend") {
				t.Errorf("the refusal does not name the backend: %s", ce.Message)
			}
			_, err = c.Snapshot(ctx, sb.ID, "")
			ce = wantCode(t, "snapshot", err, 501, api.CodeNotSupported)
			if !strings.Contains(ce.Message, "the "+b+" backend") {
				t.Errorf("the refusal does not name the backend: %s", ce.Message)
			}
			if all, err := c.List(ctx, client.ListOptions{}); err != nil || len(all) != 1 {
				t.Errorf("after the refusals: %v %+v", err, all)
			}
			if l, err := c.Snapshots(ctx, ""); err != nil || len(l) != 0 {
				t.Errorf("snapshots after the refusals: %v %+v", err, l)
			}
		})
	}
}

// TestE2EForkImageSandbox: a fork of an image sandbox carries its
// writable layer: a file it changed, one it added and one it deleted
// from the image (an overlay whiteout) are so in the copy, and a
// snapshot of it survives a server restart (its image held meanwhile).
func TestE2EForkImageSandbox(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	s, c := imageServe(t, dir)
	defer s.stop()
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: "bb:1", Policy: diskPolicy})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, s.logText())
	}
	defer c.Delete(ctx, sb.ID)
	const change = `set -e; echo ws > /workspace/f; echo changed > /etc/motd; echo added > /etc/added; test -e /etc/group; rm /etc/group; ls /etc | sort | tr '\n' ' '`
	etc := runOut(t, c, sb.ID, change)
	const look = `cat /workspace/f /etc/motd /etc/added; ls /etc | sort | tr '\n' ' '`
	want := runOut(t, c, sb.ID, look)
	res, err := c.Fork(ctx, sb.ID, api.ForkRequest{})
	if err != nil {
		t.Fatalf("fork: %v\n%s", err, s.logText())
	}
	f := res.Sandboxes[0]
	defer c.Delete(ctx, f.ID)
	if got := runOut(t, c, f.ID, look); got != want || !strings.HasSuffix(want, etc) || strings.Contains(etc, "group") {
		t.Fatalf("the copy's files:\n%q\nwant\n%q", got, want)
	}
	snap, err := c.Snapshot(ctx, sb.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	s.stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	c = s.client(t)
	res, err = c.CreateFromSnapshot(ctx, snap.ID, api.ForkRequest{})
	if err != nil {
		t.Fatalf("create from the snapshot after a restart: %v\n%s", err, s.logText())
	}
	defer c.Delete(ctx, res.Sandboxes[0].ID)
	if got := runOut(t, c, res.Sandboxes[0].ID, look); got != want {
		t.Fatalf("the snapshot's sandbox after a restart:\n%q\nwant\n%q", got, want)
	}
	if err := c.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
}
