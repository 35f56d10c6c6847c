package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sandbox"
)

func TestCheckPath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b.c/d", true},
		{"/a b/..c", true},
		{"", false},
		{"a", false},
		{"./a", false},
		{"/a/", false},
		{"//a", false},
		{"/a//b", false},
		{"/a/./b", false},
		{"/a/../b", false},
		{"/..", false},
		{"/a\x00", false},
		{"/" + strings.Repeat("a", MaxPathLen), false},
	}
	for _, tt := range tests {
		err := checkPath(tt.path)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, sandbox.ErrInvalid)) {
			t.Errorf("checkPath(%q) = %v", tt.path, err)
		}
	}
}

func TestCheckExecBounds(t *testing.T) {
	ok := &execRequest{Args: []string{"/bin/true"}, Env: []string{"A=1"}}
	if err := checkExec(ok); err != nil {
		t.Fatal(err)
	}
	bad := []*execRequest{
		{},
		{Args: []string{""}},
		{Args: make([]string, MaxArgs+1)},
		{Args: []string{"x"}, Env: []string{"=v"}},
		{Args: []string{"x"}, Env: []string{"novalue"}},
		{Args: []string{"x", strings.Repeat("y", MaxArgvEnvBytes)}},
		{Args: []string{"x"}, Dir: "rel"},
		{Args: []string{"x"}, Timeout: -1},
	}
	for _, r := range bad {
		if err := checkExec(r); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%+v: %v", r, err)
		}
	}
}
