package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/cmd/airlock/internal/sessclient"
	"github.com/airlock-dev/airlock/internal/testutil"
)

// session runs `airlock run --session name -- args` in ws and ends the
// session when the test does.
func session(t *testing.T, ws, name, stdin string, args ...string) (string, string, int) {
	t.Helper()
	t.Cleanup(func() { runIn(t, ws, "", "run", "--session", name, "--end") })
	return runIn(t, ws, stdin, append([]string{"run", "--session", name, "--"}, args...)...)
}

// waitFile polls for path within a deadline (the command inside says it
// is ready by making it).
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Each command of a session gets its own exit status and stdio, exactly
// as `airlock run` gives them.
func TestSessionExitStatusAndStdio(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "data.txt"), []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, stdin    string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"stdin to stdout", "through the session\n", []string{"cat"}, 0, "through the session\n", ""},
		{"stderr separate", "", []string{"sh", "-c", "echo out; echo err >&2"}, 0, "out\n", "err\n"},
		{"exit code", "", []string{"sh", "-c", "exit 7"}, 7, "", ""},
		{"killed by signal", "", []string{"sh", "-c", "kill -9 $$"}, 137, "", ""},
		{"not found", "", []string{"no-such-command-here"}, 127, "", "no-such-command-here"},
		{"not executable", "", []string{"./data.txt"}, 126, "", "data.txt"},
		{"next command still fine", "", []string{"sh", "-c", "exit 3"}, 3, "", ""},
	}
	for _, c := range cases {
		out, errOut, code := session(t, ws, "status", c.stdin, c.args...)
		if code != c.code || out != c.stdout || !strings.Contains(errOut, c.stderr) {
			t.Errorf("%s: exit %d stdout %q stderr %q, want %d %q %q", c.name, code, out, errOut, c.code, c.stdout, c.stderr)
		}
	}
}

// A session outlives a caller killed with SIGKILL mid-command: the
// command it ran is killed, and the next call reuses the same sandbox
// (its /tmp still holds what an earlier command left).
func TestSessionSurvivesCallerKill(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	if _, e, code := session(t, ws, "kill9", "", "sh", "-c", "echo kept > /tmp/mark"); code != 0 {
		t.Fatalf("first command: %d %s", code, e)
	}
	cmd := exec.Command(testutil.AirlockBinary(t), "run", "--session", "kill9", "--", "sh", "-c", "touch started; exec sleep 1000")
	cmd.Dir = ws
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(ws, "started"))
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	out, e, code := session(t, ws, "kill9", "", "cat", "/tmp/mark")
	if code != 0 || out != "kept\n" {
		t.Fatalf("after kill -9 of a caller: exit %d stdout %q stderr %q, want the same sandbox's /tmp/mark", code, out, e)
	}
	// The killed caller's command went with it (polled: the kill is
	// delivered, its reaping follows).
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, _ = session(t, ws, "kill9", "", "sh", "-c", "cat /proc/[0-9]*/comm")
		if !strings.Contains(out, "sleep") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed caller's command still runs: %q", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A changed policy file gets a new sandbox, never the one made under the
// old rules; the same policy gets the same one.
func TestSessionPolicyChangeNewSandbox(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	pol := filepath.Join(t.TempDir(), "p.yaml")
	write := func(v string) {
		if err := os.WriteFile(pol, []byte("version: 1\nprocess:\n  env:\n    MARK: \""+v+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(script string) (string, int) {
		t.Helper()
		t.Cleanup(func() { runIn(t, ws, "", "run", "--policy", pol, "--session", "pol", "--end") })
		out, e, code := runIn(t, ws, "", "run", "--policy", pol, "--session", "pol", "--", "sh", "-c", script)
		if code > 1 {
			t.Fatalf("%q: exit %d: %s", script, code, e)
		}
		return out, code
	}
	write("one")
	run("echo x > /tmp/made-under-one")
	if _, code := run("test -e /tmp/made-under-one"); code != 0 {
		t.Fatal("same policy: the session was not reused")
	}
	// The session made under "one" would otherwise wait out its idle
	// time: end it under the content it was keyed on, then change.
	defer runIn(t, ws, "", "run", "--policy", pol, "--session", "pol", "--end")
	oldPolicy, _ := os.ReadFile(pol)
	write("two")
	out, code := run("echo $MARK; test -e /tmp/made-under-one")
	if code == 0 || out != "two\n" {
		t.Fatalf("changed policy reused the old sandbox (stdout %q, exit %d)", out, code)
	}
	runIn(t, ws, "", "run", "--policy", pol, "--session", "pol", "--end")
	if err := os.WriteFile(pol, oldPolicy, 0o644); err != nil {
		t.Fatal(err)
	}
	// A changed flag is a new sandbox too.
	out, _, _ = runIn(t, ws, "", "run", "--policy", pol, "--env", "MARK=three", "--session", "pol", "--", "sh", "-c", "echo $MARK")
	runIn(t, ws, "", "run", "--policy", pol, "--env", "MARK=three", "--session", "pol", "--end")
	if out != "three\n" {
		t.Fatalf("changed flag: %q", out)
	}
}

// Ctrl-C (SIGINT to the caller) reaches the command, which ends with
// 128+2; the session goes on.
func TestSessionSignalReachesCommand(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	session(t, ws, "sig", "", "true")
	cmd := exec.Command(testutil.AirlockBinary(t), "run", "--session", "sig", "--", "sh", "-c", "trap 'echo got INT; exit 42' INT; touch ready; while :; do sleep 0.05; done")
	cmd.Dir = ws
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(ws, "ready"))
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 42 || out.String() != "got INT\n" {
		t.Fatalf("after SIGINT: exit %d stdout %q, want 42 and the trap's output", code, out.String())
	}
	if _, _, code := session(t, ws, "sig", "", "sh", "-c", "exit 5"); code != 5 {
		t.Fatalf("next command: exit %d", code)
	}
}

// Two callers at once on a session nobody has started yet: one sandbox
// is started and both commands run in it.
func TestSessionTwoCallersAtOnce(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	t.Cleanup(func() { runIn(t, ws, "", "run", "--session", "two", "--end") })
	var wg sync.WaitGroup
	codes := make([]int, 2)
	errs := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i], codes[i] = runIn(t, ws, "", "run", "--session", "two", "--", "sh", "-c", fmt.Sprintf("echo %d >> /tmp/callers", i))
		}()
	}
	wg.Wait()
	for i := range 2 {
		if codes[i] != 0 {
			t.Fatalf("caller %d: exit %d: %s", i, codes[i], errs[i])
		}
	}
	out, _, _ := session(t, ws, "two", "", "sort", "/tmp/callers")
	if out != "0\n1\n" {
		t.Fatalf("both callers' commands in one sandbox: /tmp/callers = %q", out)
	}
}

// sessionSocket is the socket of session name for a run in ws with no
// other flags.
func sessionSocket(t *testing.T, ws, name string) string {
	t.Helper()
	t.Chdir(ws)
	dir, err := sessionDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, sessionKey([]string{"--session", name, "--"})+".sock")
}

// attachScript speaks the session protocol as a foreign client would:
// the request with its stdio, then the reply line.
const attachScript = `import socket, json, struct, sys, array
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = json.dumps({"args": ["touch", sys.argv[2]]}).encode()
try:
    s.sendmsg([struct.pack(">I", len(body)) + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
except BrokenPipeError:
    pass  # refused before the request was read: the reply says why
print(s.makefile().readline().strip())
`

// Only the user who started a session may attach: another user is kept
// out by the 0700 directory and, were the socket reachable, by the
// daemon's SO_PEERCRED check. The same client as the owner runs its
// command (the attack works when the user is the right one).
func TestSessionOtherUserCannotAttach(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "python3")
	py := "/usr/bin/python3" // the system's, which another user can run (not a shim under /root)
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	session(t, ws, "owner", "", "true")
	sock := sessionSocket(t, ws, "owner")
	attach := func(uid uint32, mark string) (string, error) {
		cmd := exec.Command(py, "-c", attachScript, sock, filepath.Join(ws, mark))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := attach(0, "by-owner"); err != nil || !strings.HasPrefix(out, `0 ""`) {
		t.Fatalf("the owner's own client: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "by-owner")); err != nil {
		t.Fatalf("the owner's command did not run: %v", err)
	}
	out, err := attach(65534, "by-nobody")
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("another user reached the socket through the 0700 directory: %v %s", err, out)
	}
	// Loosened by hand, the directory and socket still let no one else in.
	dir := filepath.Dir(sock)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	out, _ = attach(65534, "by-nobody")
	if !strings.Contains(out, "may not attach") {
		t.Fatalf("another user attached: %s", out)
	}
	if _, err := os.Stat(filepath.Join(ws, "by-nobody")); err == nil {
		t.Fatal("another user's command ran in the session")
	}
}

// The escape suite's basics through a session: what one command leaves
// behind (a background process, a file in the session's /tmp) gives a
// later one no more than the policy. The background process's write
// outside the workspace works unconfined first.
func TestSessionLeftoversStayConfined(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	outside, err := os.MkdirTemp("/var/tmp", "airlock-session-outside-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outside)
	trigger := "/tmp/airlock-session-go-" + filepath.Base(outside)
	attack := fmt.Sprintf(`(while [ ! -e %s ]; do sleep 0.05; done; echo pwned > %s/planted 2>/dev/null; echo $? > %s/bgdone) >/dev/null 2>&1 &`,
		trigger, outside, ws)
	// Unconfined, the same attack plants its file.
	host := exec.Command("sh", "-c", attack+" touch "+trigger)
	if err := host.Run(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(ws, "bgdone"))
	os.Remove(trigger)
	if _, err := os.Stat(filepath.Join(outside, "planted")); err != nil {
		t.Fatalf("the attack does not work unconfined (broken test): %v", err)
	}
	os.Remove(filepath.Join(outside, "planted"))
	os.Remove(filepath.Join(ws, "bgdone"))

	if _, e, code := session(t, ws, "leftover", "", "sh", "-c", attack); code != 0 {
		t.Fatalf("first command: %d %s", code, e)
	}
	if _, e, code := session(t, ws, "leftover", "", "sh", "-c", "touch "+trigger); code != 0 {
		t.Fatalf("second command: %d %s", code, e)
	}
	waitFile(t, filepath.Join(ws, "bgdone"))
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Fatal("a background process a session command left behind wrote outside the policy")
	}
	if _, err := os.Stat(trigger); err == nil {
		t.Fatal("the session's /tmp is the host's")
	}
	// The later command itself is held to the policy too.
	if _, _, code := session(t, ws, "leftover", "", "sh", "-c", "echo x > "+outside+"/direct"); code == 0 {
		t.Fatal("a later session command wrote outside the policy")
	}
}

// sessionDaemonPID asks the session's socket who serves it.
func sessionDaemonPID(t *testing.T, sock string) int {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.SyscallConn()
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil {
		t.Fatal(err)
	}
	return int(cred.Pid)
}

// A crashed session (its daemon killed) is replaced by a new sandbox on
// the next call; an idle one ends by itself and leaves no file behind.
func TestSessionCrashReplacedAndIdleEnds(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	session(t, ws, "crash", "", "sh", "-c", "echo old > /tmp/mark")
	sock := sessionSocket(t, ws, "crash")
	pid := sessionDaemonPID(t, sock)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The kill is delivered; wait for the daemon to be gone (or a zombie)
	// so the next call finds a crashed session, not a dying one.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed daemon did not die")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, e, code := session(t, ws, "crash", "", "sh", "-c", "cat /tmp/mark 2>/dev/null; echo new")
	if code != 0 || out != "new\n" {
		t.Fatalf("after the daemon crashed: exit %d stdout %q stderr %q, want a new sandbox", code, out, e)
	}
	if sessionDaemonPID(t, sock) == pid {
		t.Fatal("the crashed daemon still serves")
	}
	// --end of a crashed session removes what it left.
	if err := syscall.Kill(sessionDaemonPID(t, sock), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, err := os.Stat(sock); err == nil; _, err = os.Stat(sock) {
		// Until the kill lands, --end may still reach the dying daemon.
		runIn(t, ws, "", "run", "--session", "crash", "--end")
		if time.Now().After(deadline) {
			t.Fatal("--end left the crashed session's socket")
		}
	}

	idleArgs := []string{"run", "--session", "idle", "--session-idle", "100ms", "--"}
	if _, e, code := runIn(t, ws, "", append(idleArgs, "true")...); code != 0 {
		t.Fatalf("idle session: %d %s", code, e)
	}
	base := strings.TrimSuffix(sessionSocket(t, ws, "idle"), ".sock")
	deadline = time.Now().Add(60 * time.Second)
	for {
		left, _ := filepath.Glob(base + ".*")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle session still has %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A session that cannot start says why, exits 125 and leaves no file.
func TestSessionStartFailureLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	bad := filepath.Join(ws, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nnetwork:\n  mode: sideways\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, e, code := runIn(t, ws, "", "run", "--policy", bad, "--session", "bad", "--", "true")
	if code != exitAirlock || !strings.Contains(e, "sideways") {
		t.Fatalf("exit %d stderr %q, want 125 naming the bad value", code, e)
	}
	t.Chdir(ws)
	dir, err := sessionDir()
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, sessionKey([]string{"--policy", bad, "--session", "bad", "--"})+".*")); len(left) > 0 {
		t.Fatalf("a failed start left %v", left)
	}
}

// RunFlags (what the session fast path parses) lists exactly run's flags,
// with the same boolean ones.
func TestSessionFastPathKnowsRunFlags(t *testing.T) {
	var f runFlags
	fs := newFlagSet("run")
	f.register(fs)
	seen := map[string]bool{}
	fs.VisitAll(func(fl *flag.Flag) {
		seen[fl.Name] = true
		b, ok := fl.Value.(interface{ IsBoolFlag() bool })
		isBool := ok && b.IsBoolFlag()
		if got, known := sessclient.RunFlags[fl.Name]; !known || got != isBool {
			t.Errorf("flag %s (bool %v): sessclient.RunFlags has %v, %v", fl.Name, isBool, got, known)
		}
	})
	for name := range sessclient.RunFlags {
		if !seen[name] {
			t.Errorf("sessclient.RunFlags has %s, run has no such flag", name)
		}
	}
}

// A command in a running session is served from sessclient's init: none
// of the binary's other package inits run (main's is the last of them),
// while the first call, which starts the daemon, goes through main.
func TestSessionCommandSkipsInits(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	call := func(args ...string) (string, int) {
		cmd := exec.Command(testutil.AirlockBinary(t), append([]string{"run", "--session", "inits", "--"}, args...)...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return errb.String(), code
	}
	t.Cleanup(func() { runIn(t, ws, "", "run", "--session", "inits", "--end") })
	if e, code := call("true"); code != 0 || !strings.Contains(e, "init main @") {
		t.Fatalf("first call: exit %d, main's init ran: %v (stderr %q)", code, strings.Contains(e, "init main @"), e)
	}
	e, code := call("sh", "-c", "exit 7")
	if code != 7 {
		t.Fatalf("exit %d, want 7 (stderr %q)", code, e)
	}
	for _, heavy := range []string{"init main @", "init github.com/airlock-dev/airlock/server @", "init google.golang.org/protobuf/internal/filedesc @", "init github.com/tetratelabs/wazero"} {
		if strings.Contains(e, heavy) {
			t.Errorf("a session command ran %q...: the fast path was not taken", heavy)
		}
	}
}
