package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// TestE2EVolumes: a named volume shared by two sandboxes (one writes, the
// other reads, one read-only), still there after both are destroyed and
// the server restarted; in use it cannot be deleted; another tenant can
// neither mount nor see it; bad mount points are refused.
func TestE2EVolumes(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	s, err := startServe(dir, "--backend", "native", "--listen", freePort(t), "--volume-quota", "64Mi")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.stop() }()
	ctx := context.Background()
	aliceKey, bobKey := s.newKey(t, "alice"), s.newKey(t, "bob")
	alice, _ := client.New(s.tcp, client.WithAPIKey(aliceKey))
	bob, _ := client.New(s.tcp, client.WithAPIKey(bobKey))
	if _, err := alice.CreateVolume(ctx, "data", 32<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateVolume(ctx, "data", 16<<20); !errors.Is(err, api.KindOf(api.CodeExists)) {
		t.Fatalf("a second volume of the same name: %v", err)
	}
	if _, err := alice.CreateVolume(ctx, "big", 48<<20); !errors.Is(err, api.KindOf(api.CodeLimitExceeded)) {
		t.Fatalf("past the tenant's volume quota: %v", err)
	}
	if _, err := alice.CreateVolume(ctx, "../x", 16<<20); !errors.Is(err, api.KindOf(api.CodeInvalid)) {
		t.Fatalf("a bad name: %v", err)
	}
	run := func(c *client.Client, id, script string) client.Result {
		t.Helper()
		r, err := c.Run(ctx, id, "sh", "-c", script)
		if err != nil {
			t.Fatal(err)
		}
		return *r
	}
	w, err := alice.Create(ctx, api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "data", Path: "/data"}}})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.logText())
	}
	if r := run(alice, w.ID, "echo kept > /data/note && cat /data/note"); r.Code != 0 || string(r.Stdout) != "kept\n" {
		t.Fatalf("write in the first sandbox: %+v %s", r, r.Stderr)
	}
	// The volume's size is its quota.
	if r := run(alice, w.ID, "dd if=/dev/zero of=/data/fill bs=1M count=40 2>&1; rm -f /data/fill"); !strings.Contains(string(r.Stdout), "No space left") {
		t.Fatalf("40 MiB into a 32 MiB volume: %+v %s", r, r.Stdout)
	}
	rd, err := alice.Create(ctx, api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "data", Path: "/mnt/shared", ReadOnly: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := run(alice, rd.ID, "cat /mnt/shared/note"); r.Code != 0 || string(r.Stdout) != "kept\n" {
		t.Fatalf("read in the second sandbox: %+v %s", r, r.Stderr)
	}
	if r := run(alice, rd.ID, "echo x > /mnt/shared/other"); r.Code == 0 || !strings.Contains(string(r.Stderr), "Read-only") {
		t.Fatalf("a write to a read-only mount: %+v %s", r, r.Stderr)
	}
	if v, err := alice.Volume(ctx, "data"); err != nil || len(v.InUse) != 2 {
		t.Fatalf("in use: %+v %v", v, err)
	}
	if err := alice.DeleteVolume(ctx, "data"); !errors.Is(err, api.KindOf(api.CodeExists)) {
		t.Fatalf("deleting a volume in use: %v", err)
	}
	// Another tenant: not found, whether mounted, read or deleted.
	if _, err := bob.Create(ctx, api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "data", Path: "/data"}}}); !errors.Is(err, api.KindOf(api.CodeNotFound)) {
		t.Fatalf("bob mounts alice's volume: %v", err)
	}
	if _, err := bob.Volume(ctx, "data"); !errors.Is(err, api.KindOf(api.CodeNotFound)) {
		t.Fatalf("bob reads alice's volume: %v", err)
	}
	if vs, err := bob.Volumes(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("bob's list: %+v %v", vs, err)
	}
	// Mount points: the workspace's rules, clean paths, no overlaps.
	for _, p := range []string{"/proc/x", "/", "relative", "/data/../etc", "/tmp/v", "/workspace", "/workspace/sub"} {
		_, err := alice.Create(ctx, api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "data", Path: p}}})
		if !errors.Is(err, api.KindOf(api.CodeInvalid)) {
			t.Errorf("mount point %q: %v", p, err)
		}
	}
	alice.Delete(ctx, w.ID)
	alice.Delete(ctx, rd.ID)
	if v, err := alice.Volume(ctx, "data"); err != nil || len(v.InUse) != 0 {
		t.Fatalf("after both sandboxes: %+v %v", v, err)
	}
	// The server restarts: the volume and its file are still there.
	s.stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the TCP listener", func() bool { _, err := alice.Health(ctx); return err == nil })
	again, err := alice.Create(ctx, api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "data", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := run(alice, again.ID, "cat /data/note"); r.Code != 0 || string(r.Stdout) != "kept\n" {
		t.Fatalf("after a restart: %+v %s", r, r.Stderr)
	}
	alice.Delete(ctx, again.ID)
	if err := alice.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	if vs, err := alice.Volumes(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("after delete: %+v %v", vs, err)
	}
}
