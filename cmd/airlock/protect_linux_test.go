package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
)

// gitRepo makes dir a git repository with one commit and a few files.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o755)
	os.WriteFile(filepath.Join(dir, "README"), []byte("hi\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "src", "pkg", "a.go"), []byte("package pkg\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, ".vscode"), 0o755)
	os.WriteFile(filepath.Join(dir, ".vscode", "settings.json"), []byte("{}\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// tree lists a directory tree: names, modes, owners, sizes.
func tree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v %d:%d %d\n", strings.TrimPrefix(p, root), fi.Mode(), st.Uid, st.Gid, fi.Size())
		return nil
	})
	return b.String()
}

// TestRunLeavesWorkspaceUntouched: nothing of airlock's appears in the
// workspace, seen from the host while a run is live and after `airlock
// run` was SIGKILLed mid-run; the next run starts and reclaims what the
// killed one left; git inside sees a clean tree.
func TestRunLeavesWorkspaceUntouched(t *testing.T) {
	testutil.RequireRoot(t)
	ws := filepath.Join(t.TempDir(), "ws")
	os.Mkdir(ws, 0o755)
	gitRepo(t, ws)
	before := tree(t, ws)

	out, errOut, code := runIn(t, ws, "", "run", "--", "git", "status", "--porcelain")
	if code != 0 || out != "" {
		t.Fatalf("git status inside: exit %d, out %q, err %q", code, out, errOut)
	}

	cmd := exec.Command(testutil.AirlockBinary(t), "run", "--json", "--", "sh", "-c", "echo started; sleep 60")
	cmd.Dir = ws
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		cmd.Process.Kill()
		t.Fatalf("run did not start: %q", line)
	}
	if during := tree(t, ws); during != before {
		t.Errorf("workspace changed while the run is live:\nbefore:\n%s\nduring:\n%s", before, during)
	}
	locks, _ := filepath.Glob("/run/airlock/native/run-*.lock")
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if after := tree(t, ws); after != before {
		t.Errorf("workspace changed after SIGKILL:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if len(locks) == 0 {
		t.Fatal("no state lock of the live run found: the reclaim check below proves nothing")
	}
	// The next run starts, and reclaims the dead run's state and cgroups.
	if _, errOut, code := runIn(t, ws, "", "run", "--", "true"); code != 0 {
		t.Fatalf("next run after SIGKILL: exit %d: %s", code, errOut)
	}
	for _, l := range locks {
		if alive(l) {
			continue // another test's live run
		}
		id := strings.TrimSuffix(filepath.Base(l), ".lock")
		if left := leftovers(t, id, ws); len(left) > 0 {
			t.Errorf("killed run %s not reclaimed: %v", id, left)
		}
	}
}

// alive reports whether a state lock is held by a live process.
func alive(lock string) bool {
	f, err := os.Open(lock)
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
}

// TestRunConcurrent: two runs on one workspace both work.
func TestRunConcurrent(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	gitRepo(t, ws)
	var wg sync.WaitGroup
	errs := make([]string, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, code := runIn(t, ws, "", "run", "--", "sh", "-c", fmt.Sprintf("sleep 0.5; echo %d > f%d && cat f%d", i, i, i))
			if code != 0 || strings.TrimSpace(out) != fmt.Sprint(i) {
				errs[i] = fmt.Sprintf("run %d: exit %d out %q err %q", i, code, out, errOut)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
}

// TestRunPolicyFilePinned: the sandbox cannot rewrite the policy file it
// runs under (an agent switching off its own sandbox), even when the
// workspace holds it; the summary and --json name the refusal.
func TestRunPolicyFilePinned(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	pol := filepath.Join(ws, "agent.yaml")
	const body = "version: 1\nnetwork:\n  mode: none\n"
	os.WriteFile(pol, []byte(body), 0o644)
	// Unconfined, the append works (on a copy).
	cp := filepath.Join(t.TempDir(), "agent.yaml")
	os.WriteFile(cp, []byte(body), 0o644)
	if err := exec.Command("sh", "-c", "echo 'network: {mode: open}' >> "+cp).Run(); err != nil {
		t.Fatalf("unconfined append: %v", err)
	}
	for _, script := range []string{
		"echo 'network: {mode: open}' >> agent.yaml",
		"cp agent.yaml x && echo 'network: {mode: open}' >> x && mv x agent.yaml",
		"ln -s agent.yaml l && echo 'network: {mode: open}' >> l",
		": > agent.yaml",
	} {
		_, errOut, code := runIn(t, ws, "", "run", "--policy", pol, "--json", "--", "sh", "-c", script)
		if code == 0 {
			t.Errorf("%q: succeeded", script)
		}
		if !strings.Contains(errOut, "["+policy.RulePinned+"]") || !strings.Contains(errOut, `"rule":"pinned"`) {
			t.Errorf("%q: refusal not reported: %s", script, errOut)
		}
		if b, _ := os.ReadFile(pol); string(b) != body {
			t.Fatalf("%q: policy file changed: %q", script, b)
		}
		os.Remove(filepath.Join(ws, "x"))
		os.Remove(filepath.Join(ws, "l"))
	}
}

// TestRunSIGPIPE: `airlock run ... | head` ends the command with SIGPIPE
// and airlock with it, cleanly, leaving nothing.
func TestRunSIGPIPE(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	result := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command("sh", "-c", testutil.AirlockBinary(t)+" run --result "+result+" -- yes | head -1; echo ${PIPESTATUS:-}")
	cmd.Dir = ws
	done := make(chan error, 1)
	var out []byte
	go func() { var err error; out, err = cmd.CombinedOutput(); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v %s", err, out)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("airlock run | head did not end")
	}
	var res runResult
	b, err := os.ReadFile(result)
	if err != nil || json.Unmarshal(b, &res) != nil {
		t.Fatalf("no result: %v %q (%s)", err, b, out)
	}
	if res.ExitCode != 128+int(syscall.SIGPIPE) {
		t.Errorf("exit code %d, want %d (SIGPIPE)", res.ExitCode, 128+int(syscall.SIGPIPE))
	}
	if left := leftovers(t, res.Sandbox, ws); len(left) > 0 {
		t.Errorf("left %v", left)
	}
}

// TestRunHomeAndTools: the caller's git identity (only it) reaches the
// sandbox's ~/.gitconfig read-only; PATH entries under the hidden home are
// dropped with a notice by default and kept read-only by coding-agent; a
// named cache persists between runs in airlock's store.
func TestRunHomeAndTools(t *testing.T) {
	testutil.RequireRoot(t)
	home := t.TempDir()
	ws := t.TempDir()
	gitRepo(t, ws)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Ada Host\n\temail = ada@example.org\n[credential]\n\thelper = store\n"), 0o644)
	os.MkdirAll(filepath.Join(home, "tools", "bin"), 0o755)
	os.WriteFile(filepath.Join(home, "tools", "bin", "mytool"), []byte("#!/bin/sh\necho mytool ran\n"), 0o755)
	cacheHome := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "PATH="+filepath.Join(home, "tools", "bin")+":/usr/bin:/bin", "XDG_CACHE_HOME="+cacheHome, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(testutil.AirlockBinary(t), args...)
		cmd.Dir, cmd.Env = ws, env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return o.String(), e.String(), code
	}
	out, errOut, code := run("run", "--", "sh", "-c", "git config --get user.name; git config --get credential.helper; git commit -q --allow-empty -m inside && git log -1 --format=%an")
	if code != 0 || out != "Ada Host\nAda Host\n" {
		t.Errorf("git identity inside: exit %d out %q err %q", code, out, errOut)
	}
	_, errOut, code = run("run", "--", "mytool")
	// The advice was printed with the first run in this workspace; the
	// failure says it again, for this command.
	if code != 127 || !strings.Contains(errOut, "mytool is in "+filepath.Join(home, "tools", "bin")) {
		t.Errorf("default profile: exit %d, err %q: want 127 and a notice", code, errOut)
	}
	out, errOut, code = run("run", "--profile", "coding-agent", "--", "sh", "-c", "mytool; touch "+filepath.Join(home, "tools", "bin", "x")+" || echo read-only")
	if code != 0 || out != "mytool ran\nread-only\n" {
		t.Errorf("coding-agent: exit %d out %q err %q", code, out, errOut)
	}
	for i := 0; i < 2; i++ {
		out, errOut, code = run("run", "--cache", "go", "--", "sh", "-c", "ls "+filepath.Join(home, ".cache/go-build")+"; touch "+filepath.Join(home, ".cache/go-build/entry"))
		want := ""
		if i == 1 {
			want = "entry\n"
		}
		if code != 0 || out != want {
			t.Errorf("cache run %d: exit %d out %q err %q", i, code, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(cacheHome, "airlock", "caches", "go")); err != nil {
		t.Errorf("cache not in airlock's store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "go-build")); err == nil {
		t.Error("the host's own cache directory was used")
	}
}

// TestRunZeroLimits: 0 means "no limit" for every limit flag.
func TestRunZeroLimits(t *testing.T) {
	testutil.RequireRoot(t)
	out, errOut, code := runIn(t, t.TempDir(), "", "run", "--memory", "0", "--pids", "0", "--cpus", "0", "--open-files", "0", "--", "sh", "-c", "ulimit -n")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.TrimSpace(out) == "4096" {
		t.Errorf("--open-files 0 left the profile's limit: %q", out)
	}
}

// TestRunAsNormalUser: the same refusals for a caller without root (a
// rootless sandbox), at depth 1 and 3, and the message naming the flag
// when a limit needs a cgroup the user cannot have.
func TestRunAsNormalUser(t *testing.T) {
	testutil.RequireRoot(t) // to become the normal user
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	ws := filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	for _, d := range []string{"a", "a/b/c"} {
		gitRepo(t, filepath.Join(ws, d))
	}
	filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 65534, 65534) })
	bin := filepath.Join(base, "airlock")
	b, _ := os.ReadFile(testutil.AirlockBinary(t))
	os.WriteFile(bin, b, 0o755)
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = ws
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	if _, errOut, code := run("run", "--", "true"); code == 0 {
		// A host with a delegated cgroup: nothing to check here.
		t.Log("the default limits work for this user")
	} else if !strings.Contains(errOut, "--memory 0") {
		t.Errorf("a missing cgroup does not name the flag: exit %d %q", code, errOut)
	}
	limits := []string{"--memory", "0", "--pids", "0", "--cpus", "0"}
	for _, d := range []string{"a", "a/b/c"} {
		script := "cd " + d + " && (echo evil > .git/hooks/pre-commit; echo '[core] fsmonitor=x' >> .git/config; echo x > .envrc; cp /bin/true tool && chmod 4755 tool; git init -q new) 2>&1; echo written > ok.txt; id -u"
		out, errOut, code := run(append(append([]string{"run"}, limits...), "--", "sh", "-c", script)...)
		if code != 0 || !strings.HasSuffix(out, "65534\n") {
			t.Fatalf("depth %s: exit %d out %q err %q", d, code, out, errOut)
		}
		dir := filepath.Join(ws, d)
		for _, p := range []string{".git/hooks/pre-commit", ".envrc", "new/.git/config"} {
			if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
				t.Errorf("depth %s: %s planted", d, p)
			}
		}
		if c, _ := os.ReadFile(filepath.Join(dir, ".git/config")); strings.Contains(string(c), "fsmonitor") {
			t.Errorf("depth %s: config changed", d)
		}
		if fi, err := os.Stat(filepath.Join(dir, "tool")); err == nil && fi.Mode()&os.ModeSetuid != 0 {
			t.Errorf("depth %s: set-uid tool", d)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "ok.txt")); string(b) != "written\n" {
			t.Errorf("depth %s: ordinary write: %q", d, b)
		}
		if !strings.Contains(errOut, "[git-hooks]") || !strings.Contains(errOut, "[set-id]") {
			t.Errorf("depth %s: summary: %q", d, errOut)
		}
	}
}

// TestRunWorkspaceBelowRepository: a workspace that is a package of a
// larger repository gets nothing planted: inside, the repository above is
// out of sight (git says so plainly, no "invalid gitfile format"), and
// the repository on the host is exactly as it was but for the work done.
func TestRunWorkspaceBelowRepository(t *testing.T) {
	testutil.RequireRoot(t)
	repo := t.TempDir()
	gitRepo(t, repo)
	pkg := filepath.Join(repo, "src", "pkg")
	before := tree(t, repo)
	out, errOut, code := runIn(t, pkg, "", "run", "--", "sh", "-c", "echo x > new.txt; ls -A; git status 2>&1; true")
	if code != 0 || strings.Contains(out, "gitfile") || !strings.Contains(out, "not a git repository") || strings.Contains(out, ".git\n") {
		t.Fatalf("below the repository root: exit %d out %q err %q", code, out, errOut)
	}
	after := tree(t, repo)
	if strings.ReplaceAll(after, "/src/pkg/new.txt -rw-r--r-- 0:0 2\n", "") != before {
		t.Errorf("repository changed beyond new.txt:\n%s\n---\n%s", before, after)
	}
	if out, err := exec.Command("git", "-C", repo, "status", "--porcelain").CombinedOutput(); err != nil || string(out) != "?? src/pkg/new.txt\n" {
		t.Errorf("host git status: %v %q", err, out)
	}
	// git init of a new repository is refused, naming the rule.
	plain := t.TempDir()
	_, errOut, code = runIn(t, plain, "", "run", "--", "git", "init", "-q")
	if code == 0 || !strings.Contains(errOut, "git-hooks") && !strings.Contains(errOut, "git-config") {
		t.Errorf("git init: exit %d, err %q", code, errOut)
	}
}
