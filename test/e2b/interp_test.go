package e2b_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// templateTarball is the tarball of E2B template name that
// scripts/e2b-templates.sh builds (it is run when the tarball is missing:
// cached per machine, so only the first run pays for mmdebstrap).
func templateTarball(t *testing.T, name string) string {
	t.Helper()
	testutil.RequireRoot(t)
	dir := os.Getenv("AIRLOCK_E2B_TEMPLATES")
	if dir == "" {
		dir = "/var/cache/airlock-e2b-templates"
	}
	p := filepath.Join(dir, name+".tar")
	if _, err := os.Stat(p); err != nil {
		testutil.RequireBinary(t, "mmdebstrap")
		cmd := exec.Command("../../scripts/e2b-templates.sh", "build")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/e2b-templates.sh build: %v\n%s", err, out)
		}
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no template %s after scripts/e2b-templates.sh: %v", name, err)
	}
	return p
}

// importTemplate imports template name into s's image store.
func importTemplate(t *testing.T, s *server, name string) {
	t.Helper()
	imp := exec.Command(s.bin, "image", "import", "-q", templateTarball(t, name))
	imp.Env = append(os.Environ(), "AIRLOCK_IMAGE_STORE="+filepath.Join(s.data, "images"))
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("image import %s: %v\n%s", name, err, out)
	}
}

// TestE2BCodeInterpreter runs @e2b/code-interpreter's runCode and
// contexts against the code-interpreter-v1 template (Debian's
// matplotlib, numpy and pandas) through the E2B listener.
func TestE2BCodeInterpreter(t *testing.T) {
	s, key := startServer(t)
	importTemplate(t, s, "code-interpreter-v1")
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key},
		"tests/interp.test.mjs")
}

// TestE2BTemplates: the base template made by scripts/e2b-templates.sh
// and a Dockerfile template built on it with `airlock image build` are
// E2B templates by name; calls run as "user" unless they ask for root.
func TestE2BTemplates(t *testing.T) {
	s, key := startServer(t)
	importTemplate(t, s, "base")
	dir := t.TempDir()
	df := "FROM base\nRUN echo from-dockerfile > /etc/airlock-template-mark\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(s.bin, "image", "build", "-f", filepath.Join(dir, "Dockerfile"), "-t", "my-template", dir)
	build.Env = append(os.Environ(), "AIRLOCK_IMAGE_STORE="+filepath.Join(s.data, "images"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("image build: %v\n%s", err, out)
	}
	url := "http://" + s.addr
	nodeTests(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + key},
		"tests/templates.test.mjs")
}
