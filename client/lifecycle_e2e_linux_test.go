package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/api"
	"github.com/airlock-dev/airlock/client"
)

// diskPolicy gives a sandbox a disk volume of its own (a pausable
// sandbox's files must not live in the run directory's tmpfs).
var diskPolicy = json.RawMessage(`{"limits": {"disk": "256Mi"}}`)

// treeScript prints every workspace entry's name, type, mode and size and
// every file's sha256: two equal outputs are byte-identical trees.
const treeScript = `cd /workspace && find . -mindepth 1 -exec stat -c '%n %F %a %s' {} + | sort && find . -type f -exec sha256sum {} + | sort && find . -type l -exec readlink {} + | sort`

// fillScript makes a workspace with files, a directory, modes, a symlink
// and 1 MiB of random bytes.
const fillScript = `set -e; cd /workspace; head -c 1048576 /dev/urandom > big.bin; mkdir -p src/deep; echo 'print(1)' > src/main.py;
echo secret > src/deep/key; chmod 640 src/deep/key; chmod 750 src/deep; ln -s src/main.py link; echo hidden > .dot`

func runOut(t *testing.T, c *client.Client, id, script string) string {
	t.Helper()
	r, err := c.Run(context.Background(), id, "sh", "-c", script)
	if err != nil || r.Code != 0 {
		t.Fatalf("run %q: %v %+v", script, err, r)
	}
	return string(r.Stdout)
}

func wantCode(t *testing.T, what string, err error, status int, code string) *client.Error {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != status || (code != "" && ce.Code != code) {
		t.Fatalf("%s: want %d %s, got %v", what, status, code, err)
	}
	return ce
}

// restartCase is a server stopped (cleanly or not) with a paused-to-be
// sandbox, restarted on the same data directory.
func testSurvivesRestart(t *testing.T, crash bool) {
	requireNative(t)
	s, err := startServe(t.TempDir(), "--backend", "native")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c := s.client(t)
	ctx := context.Background()
	kept, err := c.Create(ctx, api.CreateSandboxRequest{KeepAlive: true, Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	runOut(t, c, kept.ID, fillScript)
	before := runOut(t, c, kept.ID, treeScript)
	if crash {
		s.kill9()
	} else {
		s.stop()
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	c = s.client(t)
	g, err := c.Get(ctx, kept.ID)
	if err != nil || g.State != api.StatePaused {
		t.Fatalf("after restart: want paused, got %v %+v", err, g)
	}
	if o, err := c.Get(ctx, other.ID); err != nil || o.State != "stopped" {
		t.Fatalf("a sandbox without keep-alive after restart: %v %+v", err, o)
	}
	if _, err := c.Run(ctx, kept.ID, "true"); err == nil {
		t.Fatal("exec in a paused sandbox without auto_resume succeeded")
	}
	r, err := c.Resume(ctx, kept.ID)
	if err != nil || r.State != "running" || r.ID != kept.ID {
		t.Fatalf("resume: %v %+v", err, r)
	}
	if r.Verified == crash {
		t.Errorf("verified = %v after a %s: want %v", r.Verified, map[bool]string{true: "crash", false: "clean stop"}[crash], !crash)
	}
	if after := runOut(t, c, kept.ID, treeScript); after != before {
		t.Fatalf("files after resume differ:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// It works as before: writes, background processes.
	runOut(t, c, kept.ID, "echo more >> /workspace/src/main.py")
	if err := c.Delete(ctx, kept.ID); err != nil {
		t.Fatal(err)
	}
	assertNoFilesOf(t, s, kept.ID)
	assertNoFilesOf(t, s, other.ID)
}

// assertNoFilesOf fails if anything of sandbox id is left on the host.
func assertNoFilesOf(t *testing.T, s *serveProc, id string) {
	t.Helper()
	for _, pattern := range []string{
		filepath.Join(s.data, "volumes", id+"*"), filepath.Join(s.data, "workspaces", id+"*"),
		filepath.Join(s.data, "checkpoints", id+"*"), "/run/airlock/*/volumes/" + id + "*",
	} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			t.Errorf("left behind: %v", m)
		}
	}
}

// TestE2EPauseSurvivesSIGTERM: a clean shutdown pauses a keep-alive
// sandbox; the restarted server resumes it on byte-identical files,
// checked against the manifest the pause recorded.
func TestE2EPauseSurvivesSIGTERM(t *testing.T) { testSurvivesRestart(t, false) }

// TestE2EPauseSurvivesKill9: after a crash the keep-alive sandbox comes
// back paused, and resumes on its files.
func TestE2EPauseSurvivesKill9(t *testing.T) { testSurvivesRestart(t, true) }

// TestE2EPauseResumeAPI: pause and resume through the API, auto_resume,
// a sandbox whose paused files were changed on the host is refused.
func TestE2EPauseResumeAPI(t *testing.T) {
	s := requireNative(t)
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy, AutoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	runOut(t, c, sb.ID, fillScript)
	before := runOut(t, c, sb.ID, treeScript)
	if _, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Pause(ctx, sb.ID)
	if err != nil || p.State != api.StatePaused {
		t.Fatalf("pause: %v %+v", err, p)
	}
	if p, err = c.Pause(ctx, sb.ID); err != nil || p.State != api.StatePaused {
		t.Fatalf("pause again: %v %+v", err, p)
	}
	// auto_resume: an exec resumes it.
	if after := runOut(t, c, sb.ID, treeScript); after != before {
		t.Fatalf("files after auto-resume differ:\n%s\n%s", before, after)
	}
	if ps, err := c.Processes(ctx, sb.ID); err != nil || len(ps) != 0 {
		t.Fatalf("processes after resume (they were ended by the pause): %v %+v", err, ps)
	}
	// Files changed on the host while paused: resume refuses, naming the file.
	if _, err := c.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(s.data, "volumes", sb.ID+".img")
	if _, err := os.Stat(img); err != nil {
		t.Fatalf("paused sandbox's volume: %v", err)
	}
	mnt := t.TempDir()
	mount(t, img, mnt)
	if err := os.WriteFile(filepath.Join(mnt, "workspace", "src", "main.py"), []byte("import os; os.system('evil')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unmount(t, mnt)
	_, err = c.Resume(ctx, sb.ID)
	ce := wantCode(t, "resume of changed files", err, 409, api.CodeCorrupt)
	if !strings.Contains(ce.Message, "src/main.py") {
		t.Fatalf("the error does not name the file: %s", ce.Message)
	}
	if g, err := c.Get(ctx, sb.ID); err != nil || g.State != api.StatePaused {
		t.Fatalf("after a refused resume: %v %+v", err, g)
	}
	// Deleting a paused sandbox removes its files without resuming it.
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if g, err := c.Get(ctx, sb.ID); err != nil || g.State != "stopped" {
		t.Fatalf("after delete: %v %+v", err, g)
	}
	assertNoFilesOf(t, s, sb.ID)
}

// TestE2EPauseWithoutVolumes: with --disk-quota none the workspace and
// checkpoints live in the data directory; pause survives a restart there,
// rollback works, and delete leaves nothing.
func TestE2EPauseWithoutVolumes(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // the test's own: sandboxes' host ids reach their workspaces below
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	s, err := startServe(dir, "--backend", "native", "--disk-quota", "none")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{KeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	runOut(t, c, sb.ID, fillScript)
	before := runOut(t, c, sb.ID, treeScript)
	cp, err := c.Checkpoint(ctx, sb.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.data, "checkpoints", sb.ID, cp.ID+".json")); err != nil {
		t.Fatalf("checkpoint in the data directory: %v", err)
	}
	s.stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	c = s.client(t)
	if r, err := c.Resume(ctx, sb.ID); err != nil || !r.Verified {
		t.Fatalf("resume: %v %+v", err, r)
	}
	runOut(t, c, sb.ID, "rm -rf /workspace/src /workspace/big.bin")
	if _, err := c.Rollback(ctx, sb.ID, cp.ID); err != nil {
		t.Fatal(err)
	}
	if after := runOut(t, c, sb.ID, treeScript); after != before {
		t.Fatalf("after restart and rollback:\n%s\nwant:\n%s", after, before)
	}
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	assertNoFilesOf(t, s, sb.ID)
}

// TestE2ECheckpointRollback: checkpoint, then an exec wrecks the
// workspace (rm -rf), then rollback restores it byte-identical in place
// (same ID, processes restarted); a second checkpoint of an unchanged
// tree stores nothing new.
func TestE2ECheckpointRollback(t *testing.T) {
	c := requireNative(t).client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	runOut(t, c, sb.ID, fillScript)
	before := runOut(t, c, sb.ID, treeScript)
	cp, err := c.Checkpoint(ctx, sb.ID, "before damage")
	if err != nil || cp.Files < 6 || cp.Bytes < 1<<20 || cp.NewBytes != cp.Bytes {
		t.Fatalf("checkpoint: %v %+v", err, cp)
	}
	cp2, err := c.Checkpoint(ctx, sb.ID, "")
	if err != nil || cp2.NewBytes != 0 || cp2.Manifest != cp.Manifest {
		t.Fatalf("second checkpoint of the same tree: %v %+v (want no new bytes, the same manifest)", err, cp2)
	}
	if l, err := c.Checkpoints(ctx, sb.ID); err != nil || len(l) != 2 || l[0].ID != cp.ID {
		t.Fatalf("list: %v %+v", err, l)
	}
	runOut(t, c, sb.ID, "rm -rf /workspace/* /workspace/.dot && echo junk > /workspace/junk")
	if _, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Rollback(ctx, sb.ID, cp.ID)
	if err != nil || r.ID != sb.ID || r.State != "running" {
		t.Fatalf("rollback: %v %+v", err, r)
	}
	if after := runOut(t, c, sb.ID, treeScript); after != before {
		t.Fatalf("after rollback:\n%s\nwant:\n%s", after, before)
	}
	if ps, err := c.Processes(ctx, sb.ID); err != nil || len(ps) != 0 {
		t.Fatalf("processes after rollback: %v %+v", err, ps)
	}
	// The restored files are the sandbox's: it can write them.
	runOut(t, c, sb.ID, "echo x >> /workspace/src/deep/key && rm /workspace/big.bin")
	if err := c.DeleteCheckpoint(ctx, sb.ID, cp2.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Rollback(ctx, sb.ID, cp2.ID)
	wantCode(t, "rollback to a deleted checkpoint", err, 404, api.CodeNotFound)
}

// TestE2ETamperedCheckpointRefused: a checkpoint's stored file changed
// on the host is refused with 409 corrupt naming the file, and the
// sandbox is left running as it was.
func TestE2ETamperedCheckpointRefused(t *testing.T) {
	s := requireNative(t)
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	runOut(t, c, sb.ID, "echo original > /workspace/notes.txt")
	cp, err := c.Checkpoint(ctx, sb.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	runOut(t, c, sb.ID, "echo current > /workspace/notes.txt")
	objs, _ := filepath.Glob("/run/airlock/*/volumes/" + sb.ID + "/checkpoints/objects/*/*")
	if len(objs) != 1 {
		t.Fatalf("checkpoint content on the host: %v", objs)
	}
	if err := os.WriteFile(objs[0], []byte("tampered\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	_, err = c.Rollback(ctx, sb.ID, cp.ID)
	ce := wantCode(t, "rollback to a tampered checkpoint", err, 409, api.CodeCorrupt)
	if !strings.Contains(ce.Message, `"notes.txt"`) {
		t.Fatalf("the error does not name the file: %s", ce.Message)
	}
	if got := runOut(t, c, sb.ID, "cat /workspace/notes.txt"); got != "current\n" {
		t.Fatalf("after a refused rollback: %q", got)
	}
	// A changed manifest is refused too.
	mans, _ := filepath.Glob("/run/airlock/*/volumes/" + sb.ID + "/checkpoints/" + cp.ID + ".json")
	if len(mans) != 1 {
		t.Fatalf("manifest: %v", mans)
	}
	if err := os.WriteFile(mans[0], []byte(`{"version":1,"entries":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = c.Rollback(ctx, sb.ID, cp.ID)
	wantCode(t, "rollback with a changed manifest", err, 409, api.CodeCorrupt)
}

// TestE2EKeepAliveWhileProcesses: keep_alive {while: processes} keeps a
// sandbox past its timeout exactly while a background process runs.
func TestE2EKeepAliveWhileProcesses(t *testing.T) {
	c := shared.client(t)
	requireNative(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Timeout: api.Duration(time.Second),
		KeepAliveWhile: &api.KeepAliveSpec{While: api.KeepAliveWhileProcesses, Idle: api.Duration(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.KeepAliveWhile != "processes" {
		t.Fatalf("created: %+v", sb)
	}
	// A twin created the same way runs no process: once the reaper has
	// expired it, the reaper has also weighed sb past its timeout and idle
	// time (the readiness signal, instead of sleeping and hoping).
	twin, err := c.Create(ctx, api.CreateSandboxRequest{Timeout: api.Duration(time.Second),
		KeepAliveWhile: &api.KeepAliveSpec{While: api.KeepAliveWhileProcesses, Idle: api.Duration(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, twin.ID)
	if _, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sh", "-c", "while [ ! -e /workspace/stop ]; do sleep 0.1; done"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "expiry of the twin without a process", func() bool {
		g, err := c.Get(ctx, twin.ID)
		return err == nil && g.State == "stopped" && g.Reason == "expired"
	})
	// Past its timeout and its idle time, sb still runs.
	if g, err := c.Get(ctx, sb.ID); err != nil || g.State != "running" {
		t.Fatalf("past its timeout with a process running: %v %+v", err, g)
	}
	if err := c.WriteFile(ctx, sb.ID, "/workspace/stop", strings.NewReader(""), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "expiry once the process ended", func() bool {
		g, err := c.Get(ctx, sb.ID)
		return err == nil && g.State == "stopped" && g.Reason == "expired"
	})
}

// TestE2ETenantCannotPauseOthers: another tenant's sandbox is 404 to
// pause, resume, checkpoint, list checkpoints and rollback.
func TestE2ETenantCannotPauseOthers(t *testing.T) {
	requireNative(t)
	s := newServer(t, true)
	ctx := context.Background()
	a, _ := client.New(s.tcpURL(), client.WithAPIKey(s.newKey(t, "alice")))
	b, _ := client.New(s.tcpURL(), client.WithAPIKey(s.newKey(t, "bob")))
	sb, err := a.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := a.Checkpoint(ctx, sb.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Pause(ctx, sb.ID)
	wantCode(t, "bob pauses alice's", err, 404, api.CodeNotFound)
	_, err = b.Checkpoint(ctx, sb.ID, "")
	wantCode(t, "bob checkpoints alice's", err, 404, api.CodeNotFound)
	_, err = b.Checkpoints(ctx, sb.ID)
	wantCode(t, "bob lists alice's checkpoints", err, 404, api.CodeNotFound)
	_, err = b.Rollback(ctx, sb.ID, cp.ID)
	wantCode(t, "bob rolls back alice's", err, 404, api.CodeNotFound)
	wantCode(t, "bob deletes alice's checkpoint", b.DeleteCheckpoint(ctx, sb.ID, cp.ID), 404, api.CodeNotFound)
	mine, err := b.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Rollback(ctx, mine.ID, cp.ID)
	wantCode(t, "bob rolls his own back to alice's checkpoint", err, 404, api.CodeNotFound)
	if _, err := a.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = b.Resume(ctx, sb.ID)
	wantCode(t, "bob resumes alice's", err, 404, api.CodeNotFound)
	if r, err := a.Resume(ctx, sb.ID); err != nil || r.State != "running" {
		t.Fatalf("alice resumes: %v %+v", err, r)
	}
}

// TestE2EPausedAnswers409: a paused sandbox without auto_resume exists:
// what it cannot serve (exec, files, processes) answers 409 conflict
// naming the pause and the resume, not 404; another tenant still gets 404
// (nothing says the sandbox exists); after resume it serves again.
func TestE2EPausedAnswers409(t *testing.T) {
	requireNative(t)
	s := newServer(t, true)
	ctx := context.Background()
	a, _ := client.New(s.tcpURL(), client.WithAPIKey(s.newKey(t, "alice")))
	b, _ := client.New(s.tcpURL(), client.WithAPIKey(s.newKey(t, "bob")))
	sb, err := a.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Delete(ctx, sb.ID)
	if p, err := a.Pause(ctx, sb.ID); err != nil || p.State != api.StatePaused {
		t.Fatalf("pause: %v %+v", err, p)
	}
	_, err = a.Run(ctx, sb.ID, "true")
	ce := wantCode(t, "exec on a paused sandbox", err, 409, api.CodeConflict)
	if !strings.Contains(ce.Message, "is paused; resume it") || !strings.Contains(ce.Message, "/resume") {
		t.Fatalf("the 409 does not say to resume: %s", ce.Message)
	}
	_, err = a.ReadFile(ctx, sb.ID, "/etc/hostname")
	wantCode(t, "file read on a paused sandbox", err, 409, api.CodeConflict)
	_, err = a.Processes(ctx, sb.ID)
	wantCode(t, "process list of a paused sandbox", err, 409, api.CodeConflict)
	_, err = b.Run(ctx, sb.ID, "true")
	wantCode(t, "bob's exec on alice's paused sandbox", err, 404, api.CodeNotFound)
	_, err = b.Processes(ctx, sb.ID)
	wantCode(t, "bob's process list of alice's paused sandbox", err, 404, api.CodeNotFound)
	if r, err := a.Resume(ctx, sb.ID); err != nil || r.State != "running" {
		t.Fatalf("resume: %v %+v", err, r)
	}
	if res, err := a.Run(ctx, sb.ID, "true"); err != nil || res.Code != 0 {
		t.Fatalf("exec after resume: %v %+v", err, res)
	}
}

// TestE2ECheckpointQuota: a tenant's checkpoints are bounded in count and
// in the bytes they record (429), and deleting one makes room.
func TestE2ECheckpointQuota(t *testing.T) {
	requireNative(t)
	s, err := startServe(t.TempDir(), "--backend", "native", "--max-checkpoints", "2", "--checkpoint-bytes", "3Mi")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c := s.client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	runOut(t, c, sb.ID, "head -c 1048576 /dev/urandom > /workspace/f")
	a, err := c.Checkpoint(ctx, sb.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx, sb.ID, ""); err != nil {
		t.Fatal(err)
	}
	_, err = c.Checkpoint(ctx, sb.ID, "")
	wantCode(t, "a third checkpoint", err, 429, api.CodeLimitExceeded)
	if err := c.DeleteCheckpoint(ctx, sb.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	runOut(t, c, sb.ID, "head -c 2097152 /dev/urandom > /workspace/g")
	_, err = c.Checkpoint(ctx, sb.ID, "")
	wantCode(t, "a checkpoint beyond the tenant's bytes", err, 429, api.CodeLimitExceeded)
	runOut(t, c, sb.ID, "rm /workspace/g")
	if _, err := c.Checkpoint(ctx, sb.ID, ""); err != nil {
		t.Fatalf("after deleting one: %v", err)
	}
}

// TestE2EFreeze: a memory-keeping pause (cgroup freezer) stops a running
// process in place (its counter, read on the host, does not move);
// requests are refused while frozen; resume thaws the same process, which
// counts on from its own memory.
func TestE2EFreeze(t *testing.T) {
	c := requireNative(t).client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	p, err := c.Start(ctx, sb.ID, client.ExecOptions{Args: []string{"sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /workspace/n.tmp; mv /workspace/n.tmp /workspace/n; sleep 0.02; done"}})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("/run/airlock/*/volumes/" + sb.ID + "/workspace")
	if len(files) != 1 {
		t.Fatalf("workspace on the host: %v", files)
	}
	counter := func() int {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(files[0], "n"))
		var n int
		if err == nil {
			fmt.Sscan(string(b), &n)
		}
		return n
	}
	eventually(t, "the counter runs", func() bool { return counter() > 3 })
	f, err := c.Freeze(ctx, sb.ID)
	if err != nil || f.State != api.StateFrozen {
		t.Fatalf("freeze: %v %+v", err, f)
	}
	_, err = c.Run(ctx, sb.ID, "true")
	wantCode(t, "exec while frozen", err, 409, api.CodeConflict)
	frozenAt := counter()
	time.Sleep(500 * time.Millisecond) // generous: a running counter moves 25 times
	if n := counter(); n != frozenAt {
		t.Fatalf("frozen counter moved from %d to %d", frozenAt, n)
	}
	r, err := c.Resume(ctx, sb.ID)
	if err != nil || r.State != "running" {
		t.Fatalf("thaw: %v %+v", err, r)
	}
	var after int
	eventually(t, "the counter moves after the thaw", func() bool { after = counter(); return after != frozenAt })
	if after < frozenAt {
		t.Fatalf("after the thaw the counter restarted (%d, was %d): memory was not kept", after, frozenAt)
	}
	if pr, err := c.Process(ctx, sb.ID, p.ID); err != nil || !pr.Running {
		t.Fatalf("the process after thaw: %v %+v", err, pr)
	}
}

// TestE2EPauseKeepsVolumes: a paused sandbox gives up the mount of its
// named volume and gets it back, at the same path, when it resumes (it
// came back without it before).
func TestE2EPauseKeepsVolumes(t *testing.T) {
	s := requireNative(t)
	c := s.client(t)
	ctx := context.Background()
	name := "pv-" + strings.ToLower(t.Name()[len(t.Name())-6:])
	if _, err := c.CreateVolume(ctx, name, 32<<20); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteVolume(ctx, name)
	sb, err := c.Create(ctx, api.CreateSandboxRequest{Policy: diskPolicy, Volumes: []api.VolumeMount{{Name: name, Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)
	runOut(t, c, sb.ID, "echo kept > /data/f")
	if _, err := c.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, sb.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got := runOut(t, c, sb.ID, "cat /data/f; grep -c ' /data ' /proc/mounts"); got != "kept\n1\n" {
		t.Errorf("the volume after resume: %q", got)
	}
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx, name); err != nil {
		t.Errorf("delete the volume once its sandbox is gone: %v", err)
	}
}
