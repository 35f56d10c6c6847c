package egress

import (
	"bytes"
	"github.com/airlock-dev/airlock/internal/testutil/realserver"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/policy"
)

// startGitServer: git's smart-HTTP server for git.test (and api.test).
func startGitServer(t *testing.T, other http.Handler) *realserver.Git {
	return realserver.StartGit(t, other)
}

// TestGitPreset is the git preset with real git over the proxy: clone
// from anywhere on the host, push only to acme/*.
func TestGitPreset(t *testing.T) {
	g := startGitServer(t, nil)
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Git: &policy.GitRules{Fetch: []string{"git.test"}, Push: []string{"git.test/acme/*"}}}
	h := newHarness(t, Config{Network: n, RootCAs: g.CA.Pool, Resolver: StaticResolver{"git.test": {loopback}}}, g.Port)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, h.p.CAPEM(), 0o644)
	home := t.TempDir()
	gitProxy := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HTTPS_PROXY=http://" + h.addr,
			"GIT_SSL_CAINFO=" + caFile, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	work := t.TempDir()
	for _, repo := range []string{"acme", "evil"} {
		if out, err := gitProxy(work, "clone", "-q", "https://git.test/"+repo+"/repo.git", repo); err != nil {
			t.Fatalf("clone %s: %v\n%s", repo, err, out)
		}
		dir := filepath.Join(work, repo)
		os.WriteFile(filepath.Join(dir, "new"), []byte(repo), 0o644)
		realserver.GitRun(t, dir, "add", "new")
		realserver.GitRun(t, dir, "commit", "-q", "-m", "change")
	}
	before := g.Head(t, "evil/repo.git")
	out, err := gitProxy(filepath.Join(work, "evil"), "push", "-q", "origin", "main")
	if err == nil {
		t.Errorf("push to evil/repo passed:\n%s", out)
	}
	if g.Head(t, "evil/repo.git") != before {
		t.Error("evil/repo.git changed")
	}
	h.rec.wait(t, "push refusal", func(e audit.Event) bool {
		return e.Fields["action"] == "deny" && e.Fields["path"] == "/evil/repo.git/info/refs"
	})
	if out, err := gitProxy(filepath.Join(work, "acme"), "push", "-q", "origin", "main"); err != nil {
		t.Fatalf("push to acme/repo: %v\n%s", err, out)
	}
	if g.Head(t, "acme/repo.git") != strings.TrimSpace(realserver.GitRun(t, filepath.Join(work, "acme"), "rev-parse", "HEAD")) {
		t.Error("acme/repo.git did not get the push")
	}
	// Anything but git's endpoints is refused on a git-only host.
	c := h.client(poolWith(t, h.p.CAPEM()))
	if resp, err := c.Get("https://git.test/acme/repo.git/HEAD"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("dumb-HTTP GET: %v %v", resp, err)
	}
}
