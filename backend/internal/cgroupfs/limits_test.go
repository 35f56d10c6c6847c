package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"
)

func read(t *testing.T, dir, f string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, f))
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return string(b)
}

func TestApply(t *testing.T) {
	v2 := t.TempDir()
	if err := Apply(Placement{V2Dir: v2, Memory: V2, Pids: V2, CPU: V2}, Limits{Memory: 1 << 20, Pids: 7, CPUs: 0.001}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"memory.max": "1048576", "memory.swap.max": "0", "pids.max": "7", "cpu.max": "1000 100000"} {
		if got := read(t, v2, f); got != want {
			t.Errorf("v2 %s = %q, want %q", f, got, want)
		}
	}
	mem, cpu := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(mem, "memory.memsw.limit_in_bytes"), nil, 0o644)
	if err := Apply(Placement{V1Dirs: map[string]string{"memory": mem, "cpu": cpu}, Memory: V1, CPU: V1}, Limits{Memory: 2 << 20, Pids: 9, CPUs: 1.5}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"memory.limit_in_bytes": "2097152", "memory.memsw.limit_in_bytes": "2097152", "memory.swappiness": "0"} {
		if got := read(t, mem, f); got != want {
			t.Errorf("v1 %s = %q, want %q", f, got, want)
		}
	}
	if got := read(t, cpu, "cpu.cfs_quota_us"); got != "150000" {
		t.Errorf("v1 quota %q", got)
	}
	if _, err := os.Stat(filepath.Join(mem, "pids.max")); err == nil {
		t.Error("a limit without a provider was written")
	}
	if err := Apply(Placement{V2Dir: "/nonexistent/cg", Memory: V2}, Limits{Memory: 1 << 20}); err == nil {
		t.Error("an unwritable cgroup is not an error")
	}
}
