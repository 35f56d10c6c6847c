package sandboxtest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelperBuildsAndRuns checks the helper for both targets and runs the
// Linux build on the host, so a broken helper cannot pass as a backend bug.
func TestHelperBuildsAndRuns(t *testing.T) {
	for _, goos := range []string{"linux", "wasip1"} {
		if fi, err := os.Stat(buildHelper(t, goos)); err != nil || fi.Size() == 0 {
			t.Fatalf("helper for %s: %v", goos, err)
		}
	}
	bin := buildHelper(t, "linux")
	run := func(stdin string, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		c := exec.Command(bin, args...)
		c.Stdin, c.Stdout, c.Stderr = strings.NewReader(stdin), &out, &errb
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode() // -1 when killed by a signal
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	if o, e, c := run("", "echo-split", "a", "b"); o != "a" || e != "b" || c != 0 {
		t.Errorf("echo-split: %q %q %d", o, e, c)
	}
	if _, _, c := run("", "exit", "42"); c != 42 {
		t.Errorf("exit 42: %d", c)
	}
	if _, _, c := run("", "killself", "9"); c != -1 {
		t.Errorf("killself 9: exit %d, want killed by signal", c)
	}
	if o, _, _ := run("in\x00\xff", "cat"); o != "in\x00\xff" {
		t.Errorf("cat: %q", o)
	}
	o, _, _ := run("", "pattern", "1")
	pc := &patternChecker{badAt: -1}
	pc.Write([]byte(o))
	if pc.n != 1<<20 || pc.badAt >= 0 {
		t.Errorf("pattern: %d bytes, bad at %d", pc.n, pc.badAt)
	}
	if o, _, c := run("", "spawn", "3"); c != 0 || !strings.Contains(o, "spawned 3 of 3") {
		t.Errorf("spawn: %q %d", o, c)
	}
	if _, e, c := run("", "tty"); c != 1 {
		t.Errorf("tty without a terminal: exit %d %q", c, e)
	}
}

func TestPatternCheckerFindsCorruption(t *testing.T) {
	pc := &patternChecker{badAt: -1}
	pc.Write([]byte{0, 1, 2})
	pc.Write([]byte{3, 9})
	if pc.badAt != 4 || pc.badByte != 9 {
		t.Fatalf("badAt %d badByte %d", pc.badAt, pc.badByte)
	}
}

func TestChecksKnown(t *testing.T) {
	for _, c := range []string{"exec/pty", "limits/pids", "destroy/no-leaks"} {
		if !known(c) {
			t.Errorf("%s not in Checks", c)
		}
	}
	if known("exec/nope") {
		t.Error("unknown check accepted")
	}
}
