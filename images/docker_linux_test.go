package images_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// requireDocker needs a docker CLI with a daemon that answers
// (scripts/dockerd.sh starts Debian's dockerd in CI).
func requireDocker(t *testing.T) string {
	t.Helper()
	docker := testutil.RequireBinary(t, "docker")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "info").CombinedOutput(); err != nil {
		testutil.Skip(t, "dockerd does not answer: "+strings.TrimSpace(string(out)))
	}
	return docker
}

// A tarball made by the real `docker save` of an image dockerd built.
func TestImportRealDockerSave(t *testing.T) {
	docker := requireDocker(t)
	s := newStore(t)
	tag := "airlock-test/busybox:save-" + strings.ReplaceAll(t.Name(), "/", "-")
	tag = strings.ToLower(tag)
	imp := exec.Command(docker, "import", "--change", "CMD [\"sh\"]", "--change", "ENV IMAGE_VAR=from-docker", "-", tag)
	imp.Stdin = bytes.NewReader(imagestest.BusyboxTar(t))
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(docker, "rmi", "-f", tag).Run() })
	p := filepath.Join(t.TempDir(), "saved.tar")
	if out, err := exec.Command(docker, "save", "-o", p, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker save: %v: %s", err, out)
	}
	ims, err := s.Import(context.Background(), p, images.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ims) != 1 || len(ims[0].Names) != 1 || images.ShortName(ims[0].Names[0]) != tag {
		t.Fatalf("imported %+v", ims)
	}
	id, err := exec.Command(docker, "image", "inspect", "-f", "{{.Id}}", tag).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(id)); got != ims[0].ID {
		t.Errorf("ID %s, docker says %s", ims[0].ID, got)
	}
	if !strings.Contains(strings.Join(ims[0].Config.Env, " "), "IMAGE_VAR=from-docker") {
		t.Errorf("config env %v", ims[0].Config.Env)
	}
	// And back: what the store exports, docker loads.
	var buf bytes.Buffer
	if err := s.Export(context.Background(), tag, &buf); err != nil {
		t.Fatal(err)
	}
	exec.Command(docker, "rmi", "-f", tag).Run()
	load := exec.Command(docker, "load")
	load.Stdin = &buf
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("docker load: %v: %s", err, out)
	}
	if out, err := exec.Command(docker, "image", "inspect", "-f", "{{.Id}}", tag).Output(); err != nil || strings.TrimSpace(string(out)) != ims[0].ID {
		t.Errorf("loaded back: %s %v", out, err)
	}
}

// The Debian image (mmdebstrap's minbase tarball as one layer) in the
// shared test store: imported once per machine (the first run), then
// found there.
func TestImportDebian(t *testing.T) {
	r := imagestest.DebianRoot(t)
	b, err := os.ReadFile(filepath.Join(r.Layers[0], "etc/debian_version"))
	if err != nil || !strings.HasPrefix(string(b), "12") {
		t.Errorf("etc/debian_version: %q %v", b, err)
	}
	if r.Image.Unpacked < 50<<20 {
		t.Errorf("debian: only %d bytes unpacked", r.Image.Unpacked)
	}
}
