package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// A second `airlock serve` on the same --data finds the first alive
// before it touches any state and leaves with a clear message; the first
// server's keep-alive sandbox keeps running and its disk-volume sandbox
// still checkpoints, pauses and resumes (issue 24 item 12).
func TestServeSecondOnSameData(t *testing.T) {
	testutil.RequireRoot(t)
	data := filepath.Join(t.TempDir(), "data")
	sock := sbServeWith(t, "native", "--data", data, "--disk-quota", "volume")
	keep, errs, code := sbCLI(t, sock, "", "create", "--keep-alive")
	keep = strings.TrimSpace(keep)
	if code != 0 {
		t.Fatalf("create --keep-alive: %s", errs)
	}
	vol, errs, code := sbCLI(t, sock, "", "create")
	vol = strings.TrimSpace(vol)
	if code != 0 {
		t.Fatalf("create: %s", errs)
	}
	if _, errs, code := sbCLI(t, sock, "", "exec", vol, "--", "sh", "-c", "echo kept > f"); code != 0 {
		t.Fatalf("exec: %s", errs)
	}
	// The second server: another socket, the same data directory.
	// Bounded: a second server that does not see the first keeps serving.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.AirlockBinary(t), "serve", "--socket", filepath.Join(t.TempDir(), "second.sock"), "--data", data, "--backend", "native")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(out.String(), "another airlock serve (pid ") || !strings.Contains(out.String(), data) {
		t.Errorf("second serve on the same --data: %v %q, want exit 125 naming the running server and the directory", err, out.String())
	}
	if o, errs, code := sbCLI(t, sock, "", "exec", keep, "--", "echo", "alive"); code != 0 || o != "alive\n" {
		t.Errorf("the keep-alive sandbox after the second serve: %d %q %q", code, o, errs)
	}
	if o, errs, code := sbCLI(t, sock, "", "inspect", keep); code != 0 || !strings.Contains(o, "running") {
		t.Errorf("inspect the keep-alive sandbox: %d %q %q", code, o, errs)
	}
	if _, errs, code := sbCLI(t, sock, "", "checkpoint", vol); code != 0 {
		t.Errorf("checkpoint of the disk-volume sandbox: %d %q", code, errs)
	}
	if _, errs, code := sbCLI(t, sock, "", "pause", vol); code != 0 {
		t.Errorf("pause of the disk-volume sandbox: %d %q", code, errs)
	}
	if _, errs, code := sbCLI(t, sock, "", "resume", vol); code != 0 {
		t.Errorf("resume of the disk-volume sandbox: %d %q", code, errs)
	}
	if o, errs, code := sbCLI(t, sock, "", "exec", vol, "--", "cat", "f"); code != 0 || o != "kept\n" {
		t.Errorf("the disk-volume sandbox's file after pause and resume: %d %q %q", code, o, errs)
	}
}
