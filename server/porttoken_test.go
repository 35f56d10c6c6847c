package server

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPortToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ps, err := loadPortSigner(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	tok := ps.mint("sb-1", 8000, now.Add(time.Minute))
	if err := ps.check(tok, "sb-1", 8000, now); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	// The secret is kept: a restarted server accepts the same token.
	again, err := loadPortSigner(dir)
	if err != nil || again.check(tok, "sb-1", 8000, now) != nil {
		t.Fatalf("after a reload: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, portTokenKeyFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode())
	}
	parts := strings.Split(tok, ".")
	for _, c := range []struct {
		name, tok, id string
		port          int
		now           time.Time
		want          error
	}{
		{"expired", tok, "sb-1", 8000, now.Add(time.Minute), errTokenBad},
		{"other sandbox", tok, "sb-2", 8000, now, errTokenScope},
		{"other port", tok, "sb-1", 8001, now, errTokenScope},
		{"tampered expiry", strings.Join([]string{parts[0], parts[1], "9999999999", parts[3]}, "."), "sb-1", 8000, now, errTokenBad},
		{"tampered sandbox", strings.Join([]string{"sb-2", parts[1], parts[2], parts[3]}, "."), "sb-2", 8000, now, errTokenBad},
		{"other secret", (&portSigner{key: make([]byte, 32)}).mint("sb-1", 8000, now.Add(time.Minute)), "sb-1", 8000, now, errTokenBad},
		{"garbage", "x.y", "sb-1", 8000, now, errTokenBad},
		{"empty", "", "sb-1", 8000, now, errTokenBad},
	} {
		if err := ps.check(c.tok, c.id, c.port, c.now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A damaged key file is refused, not replaced.
	os.WriteFile(filepath.Join(dir, portTokenKeyFile), []byte("short"), 0o600)
	if _, err := loadPortSigner(dir); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

func TestPreviewTarget(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{PreviewDomain: "Preview.Example"}}
	for host, want := range map[string]string{
		"8000-sb-12ab.preview.example":      "sb-12ab:8000",
		"8000-sb-12ab.preview.example:8443": "sb-12ab:8000",
		"preview.example":                   "",
		"8000.preview.example":              "",
		"x-sb-1.preview.example":            "",
		"08000-sb-1.preview.example":        "",
		"8000-sb-1.evil.preview.example":    "",
		"8000-sb-1.preview.example.evil":    "",
		"70000-sb-1.preview.example":        "",
	} {
		id, port, ok := s.previewTarget(host)
		got := ""
		if ok {
			got = id + ":" + strconv.Itoa(port)
		}
		if got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}
