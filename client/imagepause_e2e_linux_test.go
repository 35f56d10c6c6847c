package client_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/images/imagestest"
)

// testImagePause: an image sandbox pauses with its writable layer (on its
// disk volume) and its image held (a prune of every unused image leaves
// it), resumes (after a SIGTERM and restart with restart set) with what it
// wrote to its image root and its workspace (after a kill -9 with crash
// set: unverified), and its delete leaves no
// layer and no lease (the prune then removes the image).
func testImagePause(t *testing.T, restart, crash bool) {
	requireNative(t)
	dir := t.TempDir()
	s, c := imageServe(t, dir)
	defer s.stop()
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: "bb:1", KeepAlive: true, Policy: diskPolicy})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, s.logText())
	}
	const script = `cat /etc/motd /workspace/f; stat -c %u:%g /etc/motd; test ! -e /etc/passwd`
	runOut(t, c, sb.ID, `set -e; echo layer > /etc/motd; echo ws > /workspace/f; rm /etc/passwd`)
	want := "layer\nws\n0:0\n"
	if got := runOut(t, c, sb.ID, script); got != want {
		t.Fatalf("before pause: %q", got)
	}
	lease := filepath.Join(dir, "images", "leases", sb.ID)
	if restart {
		if crash {
			s.kill9()
		} else {
			s.stop()
		}
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		c = s.client(t)
	} else if p, err := c.Pause(ctx, sb.ID); err != nil || p.State != api.StatePaused {
		t.Fatalf("pause: %v %+v\n%s", err, p, s.logText())
	}
	if g, err := c.Get(ctx, sb.ID); err != nil || g.State != api.StatePaused {
		t.Fatalf("want paused: %v %+v", err, g)
	}
	if _, err := os.Stat(lease); err != nil {
		t.Fatalf("paused sandbox's image lease: %v", err)
	}
	if _, err := c.PruneImages(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Image(ctx, "bb:1"); err != nil {
		t.Fatalf("a paused sandbox's image was pruned: %v", err)
	}
	if !restart {
		checkPausedLayer(t, c, filepath.Join(s.data, "volumes", sb.ID+".img"), sb.ID)
	}
	r, err := c.Resume(ctx, sb.ID)
	if err != nil || r.State != "running" || r.Verified == crash {
		t.Fatalf("resume: %v %+v\n%s", err, r, s.logText())
	}
	if got := runOut(t, c, sb.ID, script); got != want {
		t.Fatalf("after resume: %q, want %q", got, want)
	}
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	assertNoFilesOf(t, s, sb.ID)
	if m, _ := filepath.Glob(filepath.Join(s.data, "layers", sb.ID+"*")); len(m) > 0 {
		t.Errorf("writable layer left: %v", m)
	}
	if _, err := os.Stat(lease); !os.IsNotExist(err) {
		t.Errorf("image lease left after delete: %v", err)
	}
	if _, err := c.PruneImages(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Image(ctx, "bb:1"); err == nil {
		t.Errorf("prune of unused images kept the image of a deleted sandbox")
	}
}

func TestE2EImageSandboxPause(t *testing.T)        { testImagePause(t, false, false) }
func TestE2EImageSandboxPauseSIGTERM(t *testing.T) { testImagePause(t, true, false) }

// TestE2EImageSandboxPauseKill9: after a crash the image sandbox comes
// back paused (unverified) on its layer, its image held again.
func TestE2EImageSandboxPauseKill9(t *testing.T) { testImagePause(t, true, true) }

// checkPausedLayer looks at paused image sandbox id's disk volume img on
// the host: its writable layer is there, what root inside wrote is stored
// as uid 0 (inside ids: the layer is idmapped), unlike its workspace
// (its leased host ids); a change to the layer makes the resume refuse,
// naming the file, and undoing it lets the resume through.
func checkPausedLayer(t *testing.T, c *client.Client, img, id string) {
	mnt := t.TempDir()
	mount(t, img, mnt)
	motd := filepath.Join(mnt, "layer", "upper", "etc", "motd")
	for _, f := range []struct {
		path string
		root bool
	}{{motd, true}, {filepath.Join(mnt, "workspace", "f"), false}} {
		fi, err := os.Lstat(f.path)
		if err != nil {
			unmount(t, mnt)
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); (st.Uid == 0 && st.Gid == 0) != f.root {
			t.Errorf("%s stored as %d:%d (want 0:0: %v)", f.path, st.Uid, st.Gid, f.root)
		}
	}
	err := os.WriteFile(motd, []byte("changed\n"), 0)
	unmount(t, mnt)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Resume(context.Background(), id)
	if ce := wantCode(t, "resume on a changed layer", err, 409, api.CodeCorrupt); !strings.Contains(ce.Message, "/layer/etc/motd") {
		t.Fatalf("the error does not name the file: %s", ce.Message)
	}
	mount(t, img, mnt)
	err = os.WriteFile(motd, []byte("layer\n"), 0)
	unmount(t, mnt)
	if err != nil {
		t.Fatal(err)
	}
}

// TestE2EImageSandboxPauseWithoutVolumes: with --disk-quota none the
// writable layer is DATA/layers/ID; it survives a restart and its
// delete removes it.
func TestE2EImageSandboxPauseWithoutVolumes(t *testing.T) {
	requireNative(t)
	// Not below /tmp: a native image sandbox's init builds its root at
	// /tmp, hiding host paths there from its binds (its workspace is in
	// the data directory here).
	dir, err := os.MkdirTemp("/var/tmp", "airlock-imgpause-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil { // sandboxes' host ids reach their workspaces below
		t.Fatal(err)
	}
	s, c := imageServe(t, dir, "--disk-quota", "none")
	defer s.stop()
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: "bb:1", KeepAlive: true})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, s.logText())
	}
	runOut(t, c, sb.ID, `set -e; echo layer > /etc/motd; echo ws > /workspace/f`)
	s.stop()
	layer := filepath.Join(s.data, "layers", sb.ID)
	if b, err := os.ReadFile(filepath.Join(layer, "upper", "etc", "motd")); err != nil || string(b) != "layer\n" {
		t.Fatalf("paused sandbox's layer: %q %v", b, err)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	c = s.client(t)
	if r, err := c.Resume(ctx, sb.ID); err != nil || !r.Verified {
		t.Fatalf("resume: %v %+v\n%s", err, r, s.logText())
	}
	if got := runOut(t, c, sb.ID, "cat /etc/motd /workspace/f"); got != "layer\nws\n" {
		t.Fatalf("after resume: %q", got)
	}
	// Deleted while paused: the layer and the image's hold go.
	if _, err := c.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(layer); !os.IsNotExist(err) {
		t.Errorf("writable layer left after delete: %v", err)
	}
	assertNoFilesOf(t, s, sb.ID)
	if _, err := os.Stat(filepath.Join(dir, "images", "leases", sb.ID)); !os.IsNotExist(err) {
		t.Errorf("image lease left after delete: %v", err)
	}
	if _, err := c.PruneImages(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Image(ctx, "bb:1"); err == nil {
		t.Errorf("prune kept the image of a sandbox deleted while paused")
	}
}

// imageServe starts a real serve (native) on dir with an image store
// holding busybox as bb:1.
func imageServe(t *testing.T, dir string, extra ...string) (*serveProc, *client.Client) {
	t.Helper()
	s, err := startServe(dir, append([]string{"--backend", "native", "--image-store", dir + "/images"}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	c := s.client(t)
	var buf bytes.Buffer
	tg, _ := name.NewTag("bb:1")
	if err := tarball.Write(tg, imagestest.Busybox(t), &buf); err != nil {
		s.stop()
		t.Fatal(err)
	}
	if _, err := c.ImportImage(context.Background(), &buf, ""); err != nil {
		s.stop()
		t.Fatal(err)
	}
	return s, c
}

// TestE2EImageSandboxRollback: a rollback of an image sandbox (which
// stops and re-creates it) restores its workspace and keeps its
// writable layer as it is.
func TestE2EImageSandboxRollback(t *testing.T) {
	requireNative(t)
	s, c := imageServe(t, t.TempDir())
	defer s.stop()
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: "bb:1", Policy: diskPolicy})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, s.logText())
	}
	defer c.Delete(ctx, sb.ID)
	runOut(t, c, sb.ID, `set -e; echo ws > /workspace/f`)
	cp, err := c.Checkpoint(ctx, sb.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	runOut(t, c, sb.ID, `set -e; rm /workspace/f; echo after > /etc/motd`)
	if _, err := c.Rollback(ctx, sb.ID, cp.ID); err != nil {
		t.Fatalf("rollback: %v\n%s", err, s.logText())
	}
	if got := runOut(t, c, sb.ID, "cat /workspace/f /etc/motd"); got != "ws\nafter\n" {
		t.Fatalf("after rollback: %q", got)
	}
}
