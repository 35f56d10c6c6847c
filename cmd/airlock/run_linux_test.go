package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// runIn runs the airlock binary in dir with stdin, returning stdout, stderr
// and the exit code.
func runIn(t *testing.T, dir, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testutil.AirlockBinary(t), args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// The `airlock run` contract of DESIGN.md, through the real binary on the
// native backend: stdio passes through, the exit status is the command's,
// 126/127 when it cannot run / is not found, --json reports the result.
func TestRunContract(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "data.txt"), []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name           string
		stdin          string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"stdin to stdout", "hello through\n", []string{"cat"}, 0, "hello through\n", ""},
		{"stderr separate", "", []string{"sh", "-c", "echo out; echo err >&2"}, 0, "out\n", "err\n"},
		{"exit code", "", []string{"sh", "-c", "exit 7"}, 7, "", ""},
		{"killed by signal", "", []string{"sh", "-c", "kill -9 $$"}, 137, "", ""},
		{"not found", "", []string{"no-such-command-here"}, 127, "", "no-such-command-here"},
		{"not executable", "", []string{"./data.txt"}, 126, "", "data.txt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runIn(t, ws, c.stdin, append([]string{"run", "--"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, errOut)
			}
			if out != c.stdout {
				t.Errorf("stdout %q, want %q", out, c.stdout)
			}
			if !strings.Contains(errOut, c.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut, c.stderr)
			}
		})
	}
}

// --json reports exit status, duration, peak memory and violations; a
// syscall the seccomp filter denies is counted.
func TestRunJSONResult(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "unshare")
	ws := t.TempDir()
	// Unconfined, unshare -U works here (root), so a failure inside is the sandbox.
	if out, err := exec.Command("unshare", "-U", "true").CombinedOutput(); err != nil {
		t.Fatalf("unshare -U unconfined: %v %s", err, out)
	}
	result := filepath.Join(t.TempDir(), "result.json")
	_, errOut, code := runIn(t, ws, "", "run", "--result", result, "--", "unshare", "-U", "true")
	if code == 0 {
		t.Fatalf("unshare -U succeeded inside the sandbox (stderr %q)", errOut)
	}
	var res runResult
	b, err := os.ReadFile(result)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("result %q: %v", b, err)
	}
	if res.ExitCode != code || res.Backend != "native" || res.DurationMS <= 0 || res.MemoryPeakBytes <= 0 || res.Violations < 1 {
		t.Errorf("result %+v (exit %d): want the exit code, backend native, a duration, peak memory and >= 1 violation", res, code)
	}
}

// The wall-clock timeout ends the command and says so.
func TestRunTimeout(t *testing.T) {
	testutil.RequireRoot(t)
	result := filepath.Join(t.TempDir(), "result.json")
	_, errOut, code := runIn(t, t.TempDir(), "", "run", "--timeout", "1s", "--result", result, "--", "sleep", "30")
	if code == 0 || !strings.Contains(errOut, "timeout") {
		t.Fatalf("exit %d stderr %q: want a non-zero exit and a timeout message", code, errOut)
	}
	var res runResult
	b, _ := os.ReadFile(result)
	if err := json.Unmarshal(b, &res); err != nil || !res.TimedOut {
		t.Fatalf("result %s: want timed_out", b)
	}
}

// With a terminal on stdin, the command gets a PTY of its own.
func TestRunTTY(t *testing.T) {
	testutil.RequireRoot(t)
	script := testutil.RequireBinary(t, "script")
	cmd := exec.Command(script, "-qec", testutil.AirlockBinary(t)+" run -- sh -c 'tty; test -t 0 && echo stdin-is-a-tty'", "/dev/null")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v %s", err, out)
	}
	if !strings.Contains(string(out), "/dev/pts/") || !strings.Contains(string(out), "stdin-is-a-tty") {
		t.Fatalf("no PTY inside: %q", out)
	}
}

// leftovers lists what sandbox id, run in workspace ws, left on the host:
// cgroup directories, native state files, host mounts under ws.
func leftovers(t *testing.T, id, ws string) []string {
	t.Helper()
	var found []string
	for _, pat := range []string{"/sys/fs/cgroup/*/" + id, "/sys/fs/cgroup/*/*/" + id, "/sys/fs/cgroup/*/*/*/" + id, "/run/airlock/native/" + id + "*"} {
		m, _ := filepath.Glob(pat)
		found = append(found, m...)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, ws) {
				found = append(found, "mount: "+line)
			}
		}
	}
	return found
}

// A create that fails (bad path in the policy, missing rootfs) exits 125
// and leaves no cgroup, state file or mount behind; neither does a run that
// succeeded, once airlock has exited.
func TestRunLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--ro", "/nonexistent/airlock-test"}, exitAirlock},
		{[]string{"--rootfs", "/nonexistent/airlock-root"}, exitAirlock},
		{[]string{"--rw", "/nonexistent/airlock-rw", "--memory", "64Mi"}, exitAirlock},
		{[]string{"--memory", "64Mi", "--pids", "32"}, 0},
	} {
		ws := t.TempDir()
		result := filepath.Join(t.TempDir(), "result.json")
		args := append(append([]string{"run", "--result", result}, c.args...), "--", "true")
		_, errOut, code := runIn(t, ws, "", args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, c.code, errOut)
		}
		var res runResult
		b, err := os.ReadFile(result)
		if err != nil || json.Unmarshal(b, &res) != nil || res.Sandbox == "" {
			t.Fatalf("%v: no result with a sandbox id: %v %q", c.args, err, b)
		}
		if left := leftovers(t, res.Sandbox, ws); len(left) > 0 {
			t.Errorf("%v: sandbox %s left %q", c.args, res.Sandbox, left)
		}
		if entries, _ := os.ReadDir(ws); len(entries) > 0 {
			t.Errorf("%v: workspace not left as it was: %v", c.args, entries)
		}
	}
}

// An audit trail that cannot be written fails the run (125) and says so,
// even when the command succeeded.
func TestRunAuditWriteErrorFails(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := os.Stat("/dev/full"); err != nil {
		testutil.Skip(t, "no /dev/full")
	}
	_, errOut, code := runIn(t, t.TempDir(), "", "run", "--audit", "/dev/full", "--", "true")
	if code != exitAirlock || !strings.Contains(errOut, "audit file") {
		t.Fatalf("audit to a full device: exit %d, stderr %q", code, errOut)
	}
}
