package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// An image whose USER is not root starts through serve (issue 24 item
// 11): built with `airlock image build` into the server's store, created
// and run with the CLI against a real `airlock serve`; the process runs as
// that user and the sandbox's CA bundle is in place.
func TestServeImageNonRootUser(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	t.Setenv("AIRLOCK_IMAGE_STORE", store)
	tarPath := filepath.Join(dir, "bb.tar")
	tg, _ := name.NewTag("bb:1")
	if err := tarball.WriteToFile(tarPath, tg, imagestest.Busybox(t)); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	if _, errs, code := runIn(t, ws, "", "image", "import", tarPath); code != 0 {
		t.Fatalf("import: %s", errs)
	}
	for tag, df := range map[string]string{
		"nobody:1":  "FROM bb:1\nUSER nobody\n",
		"newuser:1": "FROM bb:1\nRUN echo app:x:4321:4321::/home/app:/bin/sh >> /etc/passwd\nUSER app\n",
	} {
		os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644)
		if _, errs, code := runIn(t, ws, "", "image", "build", "-f", filepath.Join(dir, "Dockerfile"), "-t", tag, dir); code != 0 {
			t.Fatalf("build %s: %s", tag, errs)
		}
	}
	sock := sbServeWith(t, "native", "--image-store", store)
	for tag, uid := range map[string]string{"nobody:1": "65534", "newuser:1": "4321"} {
		id, errs, code := sbCLI(t, sock, "", "create", "--image", tag)
		id = strings.TrimSpace(id)
		if code != 0 {
			t.Errorf("create --image %s (USER not root): %d %s", tag, code, errs)
			continue
		}
		out, errs, code := sbCLI(t, sock, "", "exec", id, "--", "sh", "-c", "id -u; test -s \"$SSL_CERT_FILE\" && echo ca; grep -c '^Cap\\(Inh\\|Prm\\|Eff\\|Amb\\):.0000000000000000' /proc/self/status")
		// The init's setup capabilities (CAP_CHOWN among them) are gone.
		if code != 0 || out != uid+"\nca\n4\n" {
			t.Errorf("exec in %s: %d %q %q", tag, code, out, errs)
		}
		sbCLI(t, sock, "", "rm", id)
	}
}
