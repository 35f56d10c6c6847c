package native

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend/internal/idmap"
	"github.com/airlock-dev/airlock/sandbox"
)

// subMap maps exactly the sandbox's id onto the caller's and every other
// id of 0..65535 onto the range, with no gap and no other host id.
func TestSubMap(t *testing.T) {
	for _, tc := range []struct {
		inside int
		want   []string
	}{
		{0, []string{"0", "1001", "1", "1", "100001", "65535"}},
		{1000, []string{"0", "100000", "1000", "1000", "1001", "1", "1001", "101001", "64535"}},
		{65535, []string{"0", "100000", "65535", "65535", "1001", "1"}},
	} {
		if got := subMap(tc.inside, 1001, 100000); !slices.Equal(got, tc.want) {
			t.Errorf("subMap(%d) = %v, want %v", tc.inside, got, tc.want)
		}
	}
}

// Without newuidmap the error names the package to install.
func TestIDMapToolsMissing(t *testing.T) {
	saved := idmap.ToolDirs
	t.Cleanup(func() { idmap.ToolDirs = saved })
	idmap.ToolDirs = []string{t.TempDir()}
	_, _, err := idmap.Tools()
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "apt-get install uidmap") {
		t.Fatalf("err = %v", err)
	}
}
