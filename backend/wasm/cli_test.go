package wasm

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// TestAirlockRunWasm drives the real binary: `airlock run --backend wasm`
// with a Ruby one-liner and with a module from the workspace.
func TestAirlockRunWasm(t *testing.T) {
	requireRuby(t)
	bin := testutil.AirlockBinary(t)
	ws := t.TempDir()
	data, err := os.ReadFile(guestModule(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "guest.wasm"), data, 0o644)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
	}{
		{[]string{"ruby", "-e", "puts 1+1"}, 0, "2\n"},
		{[]string{"ruby", "-e", "exit 7"}, 7, ""},
		{[]string{"./guest.wasm", "hello", "cli"}, 0, "hello cli\n"},
		{[]string{"./guest.wasm", "exit", "5"}, 5, ""},
	} {
		cmd := exec.Command(bin, append([]string{"run", "--backend", "wasm", "--"}, tc.args...)...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "AIRLOCK_WASM_DIR="+repoAssetDir())
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if code != tc.code || out.String() != tc.stdout {
			t.Errorf("airlock run --backend wasm -- %q: exit %d, stdout %q, stderr %q; want %d, %q",
				tc.args, code, out.String(), errb.String(), tc.code, tc.stdout)
		}
	}
	// Ctrl-C (SIGINT to airlock) stops a module, although WASI has no
	// signals: the CLI destroys the sandbox.
	cmd := exec.Command(bin, "run", "--backend", "wasm", "--", "./guest.wasm", "hold", "1")
	cmd.Dir = ws
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "held\n" {
		cmd.Process.Kill()
		t.Fatalf("guest did not start: %q", line)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != killedCode {
		t.Errorf("after SIGINT: exit %d, want %d", code, killedCode)
	}

	// A command that does not exist is 127, as for every backend.
	cmd = exec.Command(bin, "run", "--backend", "wasm", "--", "nosuchcommand")
	cmd.Dir = ws
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 127 {
		t.Errorf("missing command: %v, exit %d, want 127", err, cmd.ProcessState.ExitCode())
	}
}
