package sandbox

import (
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/policy"
)

func TestValidID(t *testing.T) {
	for id, ok := range map[string]bool{
		"sb-1": true, "a": true, "A.b_c-9": true, strings.Repeat("x", 128): true,
		"": false, "-a": false, ".a": false, "_a": false, "a/b": false, "a b": false, "..": false,
		strings.Repeat("x", 129): false, "é": false, "a\x00": false,
	} {
		if ValidID(id) != ok {
			t.Errorf("ValidID(%q) = %v, want %v", id, !ok, ok)
		}
	}
}

func TestEnviron(t *testing.T) {
	p, _ := policy.Profile("default")
	r, err := p.Resolve(policy.ResolveEnv{Cwd: "/w", Home: "/h", UID: 1, GID: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := Environ(r, []string{"PATH=/bin", "GITHUB_TOKEN=x", "HOME=/h"}, map[string]string{"HTTPS_PROXY": "http://p", "PATH": "/override"})
	want := []string{"HOME=/h", "HTTPS_PROXY=http://p", "PATH=/override"}
	if !slices.Equal(got, want) {
		t.Errorf("Environ = %q, want %q", got, want)
	}
}
