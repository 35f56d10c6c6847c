package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// airlock image and airlock run --image, as a user runs them: import a
// docker save tarball, list, run the image's command and a given one
// (the exit status passes through), build on it, remove, prune.
func TestImageCLI(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	t.Setenv("AIRLOCK_IMAGE_STORE", filepath.Join(dir, "store"))
	tarPath := filepath.Join(dir, "bb.tar")
	tg, _ := name.NewTag("bb:1")
	if err := tarball.WriteToFile(tarPath, tg, imagestest.Busybox(t)); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	out, errs, code := runIn(t, ws, "", "image", "import", tarPath)
	if code != 0 || !strings.Contains(out, "bb:1 sha256:") || !strings.Contains(errs, "downloaded and unpacked") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	if out, _, code := runIn(t, ws, "", "image", "ls"); code != 0 || !strings.Contains(out, "bb:1") {
		t.Errorf("ls: %d %q", code, out)
	}
	id, _, _ := runIn(t, ws, "", "image", "ls", "-q")
	var ims []map[string]any
	if out, _, _ := runIn(t, ws, "", "image", "inspect", "bb:1"); json.Unmarshal([]byte(out), &ims) != nil || len(ims) != 1 || ims[0]["id"] != strings.TrimSpace(id) {
		t.Errorf("inspect: %q vs %q", out, id)
	}
	// The image's cmd (sh) reads the script from stdin.
	if out, errs, code := runIn(t, ws, "echo $IMAGE_VAR; pwd; exit 3", "run", "--image", "bb:1"); code != 3 || out != "from-image\n/workspace\n" {
		t.Errorf("run the image's cmd: %d %q %q", code, out, errs)
	}
	if out, errs, code := runIn(t, ws, "", "run", "--image", "bb:1", "--", "cat", "/etc/hostname"); code != 0 || out != "busybox\n" {
		t.Errorf("run a command: %d %q %q", code, out, errs)
	}
	if _, errs, code := runIn(t, ws, "", "run", "--image", "127.0.0.1:1/nothing:1", "--", "true"); code != 125 || !strings.Contains(errs, "not in the store") {
		t.Errorf("missing image: %d %q", code, errs)
	}
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM bb:1\nRUN echo built > /built\nCMD [\"cat\", \"/built\"]\n"), 0o644)
	if out, errs, code := runIn(t, ws, "", "image", "build", "-f", filepath.Join(dir, "Dockerfile"), "-t", "built:1", dir); code != 0 || !strings.Contains(out, "built:1") {
		t.Fatalf("build: %d %q %q", code, out, errs)
	}
	if out, _, code := runIn(t, ws, "", "run", "--image", "built:1"); code != 0 || out != "built\n" {
		t.Errorf("run the built image: %d %q", code, out)
	}
	os.WriteFile(filepath.Join(dir, "Dockerfile.bad"), []byte("FROM bb:1\nVOLUME /data\n"), 0o644)
	if _, errs, code := runIn(t, ws, "", "image", "build", "-f", filepath.Join(dir, "Dockerfile.bad"), dir); code != 125 || !strings.Contains(errs, "Dockerfile.bad:2: VOLUME is not supported") {
		t.Errorf("unsupported instruction: %d %q", code, errs)
	}
	for _, ref := range []string{"bb:1", "built:1"} {
		if _, errs, code := runIn(t, ws, "", "image", "rm", ref); code != 0 {
			t.Errorf("rm %s: %d %q", ref, code, errs)
		}
	}
	if out, _, code := runIn(t, ws, "", "image", "prune", "-a"); code != 0 || !strings.Contains(out, "layers") {
		t.Errorf("prune: %d %q", code, out)
	}
	if out, _, _ := runIn(t, ws, "", "image", "ls", "-q"); out != "" {
		t.Errorf("after prune: %q", out)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "store", "layers", "sha256")); len(ents) != 0 {
		t.Errorf("layers after prune -a: %d", len(ents))
	}
	if _, errs, code := runIn(t, ws, "", "image", "frobnicate"); code != 125 || !strings.Contains(errs, "unknown command") {
		t.Errorf("unknown subcommand: %d %q", code, errs)
	}
}
