package client_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images/imagestest"
)

// A real airlock serve with the native backend runs sandboxes from its
// image store: imported through the API, created through the SDK and the
// CLI, the image's root and config, the workspace at /workspace, users
// from the image's /etc/passwd.
func TestImageSandboxThroughServer(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	s, err := startServe(dir, "--backend", "native", "--image-store", dir+"/images")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	ctx := context.Background()
	c := s.client(t)
	var buf bytes.Buffer
	tg, _ := name.NewTag("bb:1")
	if err := tarball.Write(tg, imagestest.Busybox(t), &buf); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImportImage(ctx, &buf, ""); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Image: "bb:1"})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, s.logText())
	}
	defer c.Delete(ctx, sb.ID)
	if err := c.WriteFile(ctx, sb.ID, "/workspace/in.txt", strings.NewReader("from the API"), 0); err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, sb.ID, "sh", "-c", "cat /etc/hostname; pwd; cat in.txt; echo; echo $IMAGE_VAR; id -u")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Stdout); got != "busybox\n/workspace\nfrom the API\nfrom-image\n0\n" {
		t.Errorf("inside the image sandbox: %q (stderr %q)", got, r.Stderr)
	}
	if r, err := c.RunRequest(ctx, sb.ID, api.ExecRequest{Args: []string{"id", "-un"}, User: "root"}); err != nil || strings.TrimSpace(string(r.Stdout)) != "root" {
		t.Errorf("user root: %v %+v", err, r)
	}
	// Root inside holds its capabilities over the sandbox's own id range:
	// a per-exec user runs as that user, holding none.
	if r, err := c.RunRequest(ctx, sb.ID, api.ExecRequest{Args: []string{"sh", "-c", "id -u; grep CapEff /proc/self/status"}, User: "user"}); err != nil || string(r.Stdout) != "1000\nCapEff:\t0000000000000000\n" {
		t.Errorf("user 1000: %v %q %q", err, r.Stdout, r.Stderr)
	}
	// And root inside can chown, as apt and tar need.
	if r, err := c.Run(ctx, sb.ID, "sh", "-c", "touch /etc/owned && chown 1000:1000 /etc/owned && stat -c %u:%g /etc/owned"); err != nil || string(r.Stdout) != "1000:1000\n" {
		t.Errorf("chown as root inside: %v %q %q", err, r.Stdout, r.Stderr)
	}
	// Root inside owns the image's root files (the layers are idmapped
	// through the sandbox's namespace, whose root is a leased host uid):
	// it edits /etc and makes files there as its own root.
	r, err = c.Run(ctx, sb.ID, "sh", "-c", "set -e; echo x >> /etc/hostname; mkdir /etc/t; touch /etc/t/f; stat -c %u:%g /etc/t/f /etc/passwd")
	if err != nil || r.Code != 0 || string(r.Stdout) != "0:0\n0:0\n" {
		t.Errorf("root inside an image sandbox: %v: %q %q", err, r.Stdout, r.Stderr)
	}
	// The CLI, as a user would.
	out, err := exec.Command(airlockBin, "sandbox", "--host", "unix://"+s.socket, "create", "--image", "bb:1").CombinedOutput()
	if err != nil {
		t.Fatalf("airlock sandbox create --image: %v: %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	defer exec.Command(airlockBin, "sandbox", "--host", "unix://"+s.socket, "rm", id).Run()
	out, err = exec.Command(airlockBin, "sandbox", "--host", "unix://"+s.socket, "exec", id, "--", "sh", "-c", "cat /etc/hostname; pwd").CombinedOutput()
	if err != nil || string(out) != "busybox\n/workspace\n" {
		t.Errorf("airlock sandbox exec: %v: %q", err, out)
	}
	// The old form: a directory as the image.
	if _, err := c.Create(ctx, api.CreateSandboxRequest{Image: "/srv/rootfs"}); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "image store") {
		t.Errorf("directory as image: %v", err)
	}
	// And serve --images DIR says what replaced it.
	out, _ = exec.Command(airlockBin, "serve", "--socket", dir+"/x.sock", "--data", dir+"/d2", "--images", dir).CombinedOutput()
	if !strings.Contains(string(out), "--image-store") || !strings.Contains(string(out), "airlock image import") {
		t.Errorf("serve --images DIR: %s", out)
	}
}
