// Package e2e tests the web console in a real browser (Debian's chromium,
// driven by playwright-core from ui/node_modules) against a real
// `airlock serve`; it holds tests only.
package e2e

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// TestConsoleInBrowser runs console.mjs: log in, create (a refusal at its
// field first), terminal, refused write and egress refusal live, upload,
// preview and download, checkpoint and rollback, filters and search, a
// second tenant who sees nothing, XSS probes, axe-core on every page,
// keyboard reach. Screenshots land in ui/e2e/out/.
func TestConsoleInBrowser(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	node := testutil.RequireBinary(t, "node")
	chromium := testutil.RequireBinary(t, "chromium")
	if _, err := os.Stat("../node_modules/playwright-core"); err != nil {
		testutil.Skip(t, "ui/node_modules missing: run npm ci in ui/ (scripts/deps.sh does)")
	}
	bin := testutil.AirlockBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	addr := freeAddr(t)
	var log bytes.Buffer
	srv := exec.Command(bin, "serve", "--socket", filepath.Join(dir, "s.sock"), "--data", data, "--listen", addr, "--log-level", "debug")
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
		if t.Failed() {
			t.Logf("serve log:\n%s", tail(log.String(), 6000))
		}
	})
	waitHealthy(t, "http://"+addr)
	key1, key2 := newKey(t, bin, data, "tenant-one"), newKey(t, bin, data, "tenant-two")

	out, _ := filepath.Abs("out")
	cmd := exec.Command(node, "console.mjs")
	cmd.Env = append(os.Environ(), "AIRLOCK_URL=http://"+addr, "KEY1="+key1, "KEY2="+key2, "OUT="+out, "CHROMIUM="+chromium)
	res, err := cmd.CombinedOutput()
	t.Logf("console.mjs:\n%s", res)
	if err != nil || !strings.Contains(string(res), "\nPASS") {
		t.Fatalf("browser test failed: %v", err)
	}
	for _, shot := range []string{"01-login", "02-sandboxes", "03-create", "04-sandbox", "05-images", "06-audit", "07-other-tenant"} {
		if st, err := os.Stat(filepath.Join(out, shot+".png")); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s missing: %v", shot, err)
		}
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitHealthy(t *testing.T, url string) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(url + "/healthz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // polling for the server to answer
	}
	t.Fatal("airlock serve did not answer /healthz within 60s")
}

func newKey(t *testing.T, bin, data, tenant string) string {
	out, err := exec.Command(bin, "serve", "key", "create", "--data", data, "--tenant", tenant).Output()
	if err != nil {
		t.Fatalf("key create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
