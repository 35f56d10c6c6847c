package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "memory.current"), []byte("4096\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n"), 0o644)
	for _, c := range []struct {
		name string
		got  int64
		want int64
	}{
		{"int", ReadInt(dir, "memory.current"), 4096},
		{"missing file", ReadInt(dir, "nope"), 0},
		{"no dir", ReadInt("", "memory.current"), 0},
		{"key", ReadKey(dir, "memory.events", "oom_kill"), 2},
		{"key is not a prefix match", ReadKey(dir, "memory.events", "oom"), 1},
		{"missing key", ReadKey(dir, "memory.events", "x"), 0},
		{"key no dir", ReadKey("", "memory.events", "oom"), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestRemove(t *testing.T) {
	d := filepath.Join(t.TempDir(), "cg")
	os.Mkdir(d, 0o755)
	if err := Remove(d, nil); err != nil {
		t.Fatal(err)
	}
	if err := Remove(d, nil); err != nil {
		t.Fatalf("missing directory: %v", err)
	}
	os.Mkdir(d, 0o755)
	os.WriteFile(filepath.Join(d, "f"), nil, 0o644)
	if err := Remove(d, nil); err == nil {
		t.Fatal("removed a non-empty directory")
	}
}
