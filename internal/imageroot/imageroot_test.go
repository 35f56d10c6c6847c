package imageroot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestOptions(t *testing.T) {
	w := &Writable{Upper: "/rw/u", Work: "/rw/w"}
	dir, o, err := Options([]string{"/s/l/a/fs", "/s/l/b/fs"}, w)
	if err != nil || dir != "" || o != "userxattr,lowerdir=/s/l/b/fs:/s/l/a/fs,upperdir=/rw/u,workdir=/rw/w" {
		t.Errorf("Options = %q %q %v", dir, o, err)
	}
	var many []string
	for i := 0; i < 50; i++ {
		many = append(many, fmt.Sprintf("/var/lib/airlock/images/layers/sha256/%064d/fs", i))
	}
	dir, o, err = Options(many, w)
	if err != nil || dir != "/var/lib/airlock/images/layers/sha256" || len(o) > maxOptions || strings.Contains(o, "/var/lib/airlock/images/layers") {
		t.Errorf("50 layers: %q %d bytes %v", dir, len(o), err)
	}
	for i := 0; i < 100; i++ {
		many = append(many, fmt.Sprintf("/var/lib/airlock/images/layers/sha256/%064d/fs", i+50))
	}
	if _, _, err := Options(many, w); !errors.Is(err, sandbox.ErrNotSupported) {
		t.Errorf("150 layers: %v", err)
	}
}

func TestMakeRemoveSweep(t *testing.T) {
	base := filepath.Join(t.TempDir(), "rw")
	w, err := Make(base, "sb-1", -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Make(base, "sb-1", -1, -1); !errors.Is(err, sandbox.ErrExists) {
		t.Errorf("twice: %v", err)
	}
	if err := os.WriteFile(filepath.Join(w.Upper, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(w.Upper, "ro"), 0o555)
	w2, _ := Make(base, "sb-2", -1, -1)
	if err := Sweep(base, map[string]bool{"sb-2": true}, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("swept layer still there: %v", err)
	}
	if err := w2.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := Make(base, "../x", -1, -1); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("bad id: %v", err)
	}
}

func TestCheck(t *testing.T) {
	if err := Check(sandbox.Spec{Image: "/srv/images/alpine"}); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "filesystem.rootfs") {
		t.Errorf("directory as image: %v", err)
	}
	if err := Check(sandbox.Spec{Image: "debian"}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("unresolved: %v", err)
	}
	if err := Check(sandbox.Spec{Image: "x", Root: &sandbox.ImageRoot{Layers: []string{"/nonexistent/fs"}}}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("missing layer: %v", err)
	}
	if err := Check(sandbox.Spec{Image: "x", Root: &sandbox.ImageRoot{Layers: []string{t.TempDir()}}}); err != nil {
		t.Errorf("good: %v", err)
	}
}
