package policy

import (
	"errors"
	"strings"
	"testing"
)

// A policy naming a backend this build does not have is refused when it is
// checked, not when a sandbox is about to start.
func TestUnknownBackendRefused(t *testing.T) {
	for _, b := range []string{"nope"} {
		_, err := Parse("p.yaml", []byte("version: 1\nbackend: "+b+"\n"))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "backend") {
			t.Errorf("backend %q: %v", b, err)
		}
	}
	for _, b := range []string{"auto", "native", "gvisor", "docker", "wasm", "microvm", "kubernetes"} {
		if _, err := Parse("p.yaml", []byte("version: 1\nbackend: "+b+"\n")); err != nil {
			t.Errorf("backend %q: %v", b, err)
		}
	}
}
