package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// TestMCPDataDirLocked: `airlock mcp --data DIR` holds DIR like serve
// does: a second mcp, or a serve, on the same DIR is refused (125, naming
// the running one and DIR) and leaves the first alone; an mcp on a
// serve's DIR is refused the same way (issue 24 item 12).
func TestMCPDataDirLocked(t *testing.T) {
	bin := testutil.AirlockBinary(t)
	noHost := []string{"AIRLOCK_HOST=", envMCPToken + "="}
	run := func(args ...string) (string, int) {
		// Bounded: one that does not see the first keeps serving.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), noHost...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	data := filepath.Join(t.TempDir(), "data")
	s := mcpSession(t, noHost, "--data", data, "--backend", "wasm")
	list := func(when string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := s.ListTools(ctx, nil); err != nil {
			t.Fatalf("the first airlock mcp %s: %v", when, err)
		}
	}
	list("before")
	if out, code := run("mcp", "--data", data, "--backend", "wasm"); code != 125 || !strings.Contains(out, "another airlock mcp (pid ") || !strings.Contains(out, data) {
		t.Errorf("a second airlock mcp on the same --data: %d %q, want 125 naming the running one and the directory", code, out)
	}
	if out, code := run("serve", "--socket", filepath.Join(t.TempDir(), "s.sock"), "--data", data, "--backend", "wasm"); code != 125 || !strings.Contains(out, "another airlock mcp (pid ") {
		t.Errorf("airlock serve on an mcp's --data: %d %q, want 125 naming the running mcp", code, out)
	}
	list("after both were refused")
	sdata := filepath.Join(t.TempDir(), "sdata")
	sbServeWith(t, "wasm", "--data", sdata)
	if out, code := run("mcp", "--data", sdata, "--backend", "wasm"); code != 125 || !strings.Contains(out, "another airlock serve (pid ") || !strings.Contains(out, sdata) {
		t.Errorf("airlock mcp on a serve's --data: %d %q, want 125 naming the running serve and the directory", code, out)
	}
}
