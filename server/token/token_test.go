package token

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPortToken(t *testing.T) {
	dir := t.TempDir()
	ps, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	tok := ps.Mint("sb-1", 8000, now.Add(time.Minute))
	if err := ps.Check(tok, "sb-1", 8000, now); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	// The secret is kept: a restarted server accepts the same token.
	again, err := Load(dir)
	if err != nil || again.Check(tok, "sb-1", 8000, now) != nil {
		t.Fatalf("after a reload: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, keyFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode())
	}
	parts := strings.Split(tok, ".")
	for _, c := range []struct {
		name, tok, id string
		port          int
		now           time.Time
		want          error
	}{
		{"expired", tok, "sb-1", 8000, now.Add(time.Minute), ErrBad},
		{"other sandbox", tok, "sb-2", 8000, now, ErrScope},
		{"other port", tok, "sb-1", 8001, now, ErrScope},
		{"tampered expiry", strings.Join([]string{parts[0], parts[1], "9999999999", parts[3]}, "."), "sb-1", 8000, now, ErrBad},
		{"tampered sandbox", strings.Join([]string{"sb-2", parts[1], parts[2], parts[3]}, "."), "sb-2", 8000, now, ErrBad},
		{"other secret", (&Signer{key: make([]byte, 32)}).Mint("sb-1", 8000, now.Add(time.Minute)), "sb-1", 8000, now, ErrBad},
		{"garbage", "x.y", "sb-1", 8000, now, ErrBad},
		{"empty", "", "sb-1", 8000, now, ErrBad},
	} {
		if err := ps.Check(c.tok, c.id, c.port, c.now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A damaged key file is refused, not replaced.
	os.WriteFile(filepath.Join(dir, keyFile), []byte("short"), 0o600)
	if _, err := Load(dir); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}
