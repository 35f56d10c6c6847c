package main

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/testutil"
)

// The volume commands and create --volume against a real server.
func TestSandboxCLIVolumes(t *testing.T) {
	testutil.RequireRoot(t)
	sock := sbServe(t, "native")
	if out, errOut, code := sbCLI(t, sock, "", "volume", "create", "notes", "16Mi"); code != 0 || out != "notes\n" {
		t.Fatalf("volume create: %d %q %s", code, out, errOut)
	}
	if _, errOut, code := sbCLI(t, sock, "", "create", "--volume", "notes"); code != exitAirlock || !strings.Contains(errOut, "NAME:PATH") {
		t.Fatalf("a bad --volume: %d %s", code, errOut)
	}
	out, errOut, code := sbCLI(t, sock, "", "create", "--volume", "notes:/notes")
	if code != 0 {
		t.Fatalf("create --volume: %d %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	if _, errOut, code := sbCLI(t, sock, "", "exec", id, "--", "sh", "-c", "echo hello > /notes/a"); code != 0 {
		t.Fatalf("write: %d %s", code, errOut)
	}
	if out, _, _ := sbCLI(t, sock, "", "volume", "ls"); !strings.Contains(out, "notes") || !strings.Contains(out, id) {
		t.Fatalf("volume ls: %s", out)
	}
	if _, errOut, code := sbCLI(t, sock, "", "volume", "rm", "notes"); code != exitAirlock || !strings.Contains(errOut, "in use") {
		t.Fatalf("rm in use: %d %s", code, errOut)
	}
	sbCLI(t, sock, "", "rm", id)
	out, _, _ = sbCLI(t, sock, "", "create", "--volume", "notes:/srv/n:ro")
	id = strings.TrimSpace(out)
	if out, errOut, code := sbCLI(t, sock, "", "exec", id, "--", "cat", "/srv/n/a"); code != 0 || out != "hello\n" {
		t.Fatalf("read back: %d %q %s", code, out, errOut)
	}
	sbCLI(t, sock, "", "rm", id)
	if _, errOut, code := sbCLI(t, sock, "", "volume", "rm", "notes"); code != 0 {
		t.Fatalf("rm: %d %s", code, errOut)
	}
}
