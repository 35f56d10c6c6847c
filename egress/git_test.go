package egress

import (
	"bytes"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
)

// gitServer is git's own smart-HTTP server (git http-backend as CGI)
// behind a real TLS server for git.test, with bare repositories
// acme/repo.git and evil/repo.git, both accepting pushes.
type gitServer struct {
	root string
	port uint16
	ca   *testCA
}

// startGitServer starts it; other, when set, also serves api.test on the
// same server.
func startGitServer(t *testing.T, other http.Handler) *gitServer {
	t.Helper()
	gitBin := testutil.RequireBinary(t, "git")
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	root := t.TempDir()
	seed := t.TempDir()
	gitRun(t, seed, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644)
	gitRun(t, seed, "add", "README")
	gitRun(t, seed, "commit", "-q", "-m", "seed")
	for _, r := range []string{"acme/repo.git", "evil/repo.git"} {
		dir := filepath.Join(root, r)
		gitRun(t, root, "clone", "-q", "--bare", seed, dir)
		gitRun(t, dir, "config", "http.receivepack", "true")
	}
	ca := newTestCA(t)
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	var srv http.Handler = h
	if other != nil {
		srv = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host == "api.test" {
				other.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	return &gitServer{root: root, port: startTLS(t, ca, srv, "git.test", "api.test"), ca: ca}
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (g *gitServer) head(t *testing.T, repo string) string {
	return strings.TrimSpace(gitRun(t, filepath.Join(g.root, repo), "rev-parse", "main"))
}

// TestGitPreset is the git preset with real git over the proxy: clone
// from anywhere on the host, push only to acme/*.
func TestGitPreset(t *testing.T) {
	g := startGitServer(t, nil)
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Git: &policy.GitRules{Fetch: []string{"git.test"}, Push: []string{"git.test/acme/*"}}}
	h := newHarness(t, Config{Network: n, RootCAs: g.ca.pool, Resolver: StaticResolver{"git.test": {loopback}}}, g.port)
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
		gitRun(t, dir, "add", "new")
		gitRun(t, dir, "commit", "-q", "-m", "change")
	}
	before := g.head(t, "evil/repo.git")
	out, err := gitProxy(filepath.Join(work, "evil"), "push", "-q", "origin", "main")
	if err == nil {
		t.Errorf("push to evil/repo passed:\n%s", out)
	}
	if g.head(t, "evil/repo.git") != before {
		t.Error("evil/repo.git changed")
	}
	h.rec.wait(t, "push refusal", func(e audit.Event) bool {
		return e.Fields["action"] == "deny" && e.Fields["path"] == "/evil/repo.git/info/refs"
	})
	if out, err := gitProxy(filepath.Join(work, "acme"), "push", "-q", "origin", "main"); err != nil {
		t.Fatalf("push to acme/repo: %v\n%s", err, out)
	}
	if g.head(t, "acme/repo.git") != strings.TrimSpace(gitRun(t, filepath.Join(work, "acme"), "rev-parse", "HEAD")) {
		t.Error("acme/repo.git did not get the push")
	}
	// Anything but git's endpoints is refused on a git-only host.
	c := h.client(poolWith(t, h.p.CAPEM()))
	if resp, err := c.Get("https://git.test/acme/repo.git/HEAD"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("dumb-HTTP GET: %v %v", resp, err)
	}
}
