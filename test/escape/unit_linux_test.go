package escape

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/policy"
)

func TestVerdictLine(t *testing.T) {
	for _, c := range []struct{ stdout, stderr, want string }{
		{"noise\nBLOCKED: open x: permission denied\n", "", "BLOCKED: open x: permission denied"},
		{"ESCAPED: read it\n", "", "ESCAPED: read it"},
		{"running op\nN/A: no loader", "", "N/A: no loader"},
		{"ABCABC", "ESCAPED: wrote 8 MiB of output\n", "ESCAPED: wrote 8 MiB of output"},
		{"", "fatal error: runtime: out of memory", "fatal error: runtime: out of memory"},
		{"ABCABC", "", "no verdict printed (6 bytes of output)"},
	} {
		if got := verdictLine(c.stdout, c.stderr); got != c.want {
			t.Errorf("verdictLine(%q, %q) = %q, want %q", c.stdout, c.stderr, got, c.want)
		}
	}
}

func TestOverLimit(t *testing.T) {
	p := &policy.Policy{Limits: policy.Limits{OpenFiles: 4096, Pids: 512, DiskBytes: 1 << 30}}
	for _, c := range []struct {
		name, line string
		over       bool
	}{
		{"fd-exhaustion", "BLOCKED: descriptor limit after 4093 open files: too many open files", false},
		{"fd-exhaustion", "BLOCKED: descriptor limit after 19945 open files: I/O error", true},
		{"fork-bomb", "BLOCKED: process limit after 505 children: resource temporarily unavailable", false},
		{"fork-bomb", "BLOCKED: process limit after 9000 children: resource temporarily unavailable", true},
		{"disk-fill-tmp", "BLOCKED: disk full after 1024 MiB in /tmp: no space left on device", false},
		{"disk-fill-tmp", "BLOCKED: disk full after 3000 MiB in /tmp: no space left on device", true},
		{"memory-bomb", "allocated 0 MiB", false},
	} {
		if got := overLimit(c.name, c.line, p) != ""; got != c.over {
			t.Errorf("overLimit(%s, %q) = %v, want %v", c.name, c.line, got, c.over)
		}
	}
}

func TestWorkspaceChanges(t *testing.T) {
	dir := t.TempDir()
	if err := prepareWorkspace(dir); err != nil {
		t.Fatal(err)
	}
	if bad := workspaceChanges(dir); len(bad) != 0 {
		t.Fatalf("fresh workspace reported changed: %v", bad)
	}
	os.WriteFile(filepath.Join(dir, ".zshrc"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, ".git/config"), []byte("[core]\n\thooksPath = /tmp\n"), 0o644)
	bad := strings.Join(workspaceChanges(dir), ";")
	if !strings.Contains(bad, ".zshrc was created") || !strings.Contains(bad, ".git/config was modified") {
		t.Fatalf("changes not found: %s", bad)
	}
}

func TestDNSName(t *testing.T) {
	q := []byte{3, 'a', 'b', 'c', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1}
	if got := dnsName(q); got != "abc.test" {
		t.Fatalf("dnsName = %q", got)
	}
}

// TestAttackTable checks the table itself: unique names, every category of
// the issue covered, at least 40 attacks, each with a goal and arguments.
func TestAttackTable(t *testing.T) {
	seen := map[string]bool{}
	cats := map[string]int{}
	for _, a := range allAttacks() {
		if seen[a.name] {
			t.Errorf("duplicate attack %s", a.name)
		}
		seen[a.name] = true
		cats[a.category]++
		if a.goal == "" || a.cmd == "" || a.args == nil || a.wasi == "" {
			t.Errorf("attack %s is incomplete", a.name)
		}
	}
	for _, c := range []string{"files", "processes", "kernel", "network", "self-defence"} {
		if cats[c] == 0 {
			t.Errorf("no attack in category %s", c)
		}
	}
	if len(seen) < 40 {
		t.Errorf("%d attacks, want at least 40", len(seen))
	}
}
