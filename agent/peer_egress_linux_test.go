package agent

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
)

// TestEgressProgramRules goes through the whole path: real clients run by
// the guest as an unprivileged user, the guest's egress listener naming
// the program, and the real egress proxy applying a rule that only git's
// HTTP helper may use. git reaches the server; curl, python, a renamed
// copy of the helper, a symlink and argv[0] named like it, and git with an
// LD_PRELOAD from a writable directory are refused by the proxy.
func TestEgressProgramRules(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "git")
	testutil.RequireBinary(t, "curl")
	helper := "/usr/lib/git-core/git-remote-http"
	if _, err := os.Stat(helper); err != nil {
		t.Skip("no " + helper)
	}
	var mu sync.Mutex
	var got []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path)
		mu.Unlock()
		http.NotFound(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	px, err := egress.New(egress.Config{SandboxID: "sb-prog",
		Network: policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)},
			Requests: []policy.RequestRule{{Host: "web.test", Methods: []string{"GET", "POST"}, Programs: []string{"git-remote-http"}}}},
		Resolver: egress.StaticResolver{"web.test": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	own := nobodyDir(t)
	copyFile(t, helper, filepath.Join(own, "git-remote-http"), 0o755)
	lib, _ := filepath.EvalSymlinks("/usr/lib/x86_64-linux-gnu/libz.so.1")
	copyFile(t, lib, filepath.Join(own, "libz.so.1"), 0o755)
	if err := os.Mkdir(filepath.Join(own, "l"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/curl", filepath.Join(own, "l", "git-remote-http")); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.UID, cfg.GID = 65534, 65534
	cfg.EgressAddr = freePort(t)
	cfg.Env = append(cfg.Env, "http_proxy=http://"+cfg.EgressAddr, "GIT_TERMINAL_PROMPT=0")
	g := startGuest(t, guestOptions{config: &cfg, client: ClientOptions{SandboxID: "sb-prog", Egress: px}})
	u := fmt.Sprintf("http://web.test:%d/", port)
	curl := "curl -s -o /dev/null -w '%{http_code}' "
	for _, tc := range []struct{ name, script, wantOut string }{
		{"git", "git ls-remote " + u + "git.git; true", ""},
		{"curl", curl + u + "curl.git/info/refs", "403"},
		{"python", "python3 -c 'import urllib.request as u\ntry: u.urlopen(\"" + u + "python\")\nexcept Exception as e: print(e.code)'", "403"},
		{"renamed copy", "echo list | " + own + "/git-remote-http x " + u + "copy.git >/dev/null 2>&1; true", ""},
		{"argv0", "bash -c \"exec -a git-remote-http " + curl + u + "argv0\"", "403"},
		{"symlink", own + "/l/git-remote-http -s -o /dev/null -w '%{http_code}' " + u + "symlink", "403"},
		{"LD_PRELOAD", "LD_PRELOAD=" + own + "/libz.so.1 git ls-remote " + u + "preload.git 2>/dev/null; true", ""},
	} {
		r := mustRun(t, g.client, sh(tc.script))
		if strings.TrimSpace(r.stdout) != tc.wantOut {
			t.Errorf("%s: stdout %q (stderr %q), want %q", tc.name, r.stdout, r.stderr, tc.wantOut)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"/git.git/info/refs"}) {
		t.Errorf("the server saw %q; want only git's /git.git/info/refs", got)
	}
}

// programLog records the program (or why none) of each egress request
// event, in order.
type programLog struct {
	mu  sync.Mutex
	got []string
}

func (l *programLog) Emit(e audit.Event) {
	if e.Fields["request"] != true {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := e.Fields["program"].(string); ok {
		l.got = append(l.got, p)
	} else {
		l.got = append(l.got, fmt.Sprint("unverified: ", e.Fields["program_unverified"]))
	}
}

func (l *programLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.got) == 0 {
		return ""
	}
	return l.got[len(l.got)-1]
}

// TestEgressProgramsFollowLiveRules: the guest names the program behind a
// connection only while some rule names programs, and follows live
// changes: with rules naming none, curl's request carries no program (the
// /proc walk is skipped); once SetNetwork adds a program rule, the very
// next connection is named (curl passes, python3 is named and refused); once it
// removes it, naming stops again.
func TestEgressProgramsFollowLiveRules(t *testing.T) {
	testutil.RequireRoot(t)
	curlPath, err := filepath.EvalSymlinks(testutil.RequireBinary(t, "curl"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	network := func(programs ...string) policy.Network {
		return policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{fmt.Sprintf("127.0.0.1/32:%d", port)},
			Requests: []policy.RequestRule{{Host: "web.test", Methods: []string{"GET"}, Programs: programs}}}
	}
	rec := &programLog{}
	px, err := egress.New(egress.Config{SandboxID: "sb-live", Network: network(), Audit: rec,
		Resolver: egress.StaticResolver{"web.test": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig()
	cfg.UID, cfg.GID = 65534, 65534
	cfg.EgressAddr = freePort(t)
	cfg.Env = append(cfg.Env, "http_proxy=http://"+cfg.EgressAddr)
	g := startGuest(t, guestOptions{config: &cfg, client: ClientOptions{SandboxID: "sb-live", Egress: px}})
	u := fmt.Sprintf("http://web.test:%d/", port)
	get := func(client string) (code, program string) {
		t.Helper()
		script := "curl -s -o /dev/null -w '%{http_code}' " + u
		if client == "python3" {
			script = "python3 -c 'import urllib.request as u\ntry: print(u.urlopen(\"" + u + "\").status)\nexcept Exception as e: print(e.code)'"
		}
		r := mustRun(t, g.client, sh(script))
		return strings.TrimSpace(r.stdout), rec.last()
	}
	skipped := "unverified: " + notIdentified
	for i, step := range []struct {
		programs      []string
		client        string
		code, program string
	}{
		{nil, "curl", "200", skipped},
		{[]string{"curl"}, "curl", "200", curlPath},
		{[]string{"curl"}, "python3", "403", "named"},
		{nil, "curl", "200", skipped},
		{nil, "python3", "200", skipped},
		{[]string{"curl"}, "curl", "200", curlPath},
	} {
		if i > 0 {
			if err := px.SetNetwork(network(step.programs...)); err != nil {
				t.Fatal(err)
			}
		}
		code, program := get(step.client)
		named := step.program == "named" && strings.HasPrefix(program, "/") && program != curlPath
		if code != step.code || program != step.program && !named {
			t.Errorf("step %d (programs %v, %s): %s with program %q; want %s with %q", i, step.programs, step.client, code, program, step.code, step.program)
		}
	}
}
