package hostfs

import (
	"os"
	"slices"
	"testing"
)

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		path  string
		roots []string
		want  bool
	}{
		{"/a/b", []string{"/a"}, true},
		{"/a", []string{"/a"}, true},
		{"/ab", []string{"/a"}, false},
		{"/x", []string{"/"}, true},
		{"/x", nil, false},
	} {
		if got := Under(c.path, c.roots); got != c.want {
			t.Errorf("Under(%q, %q) = %v", c.path, c.roots, got)
		}
	}
}

type m struct{ dst, src string }

func TestSortMounts(t *testing.T) {
	ms := []m{{"/a/b", "deny"}, {"/a/b", "1"}, {"/a", "2"}, {"/a/b", "3"}, {"/", "4"}}
	SortMounts(ms, func(x m) string { return x.dst }, func(x m) bool { return x.src == "deny" })
	want := []m{{"/", "4"}, {"/a", "2"}, {"/a/b", "1"}, {"/a/b", "3"}, {"/a/b", "deny"}}
	if !slices.Equal(ms, want) {
		t.Errorf("got %v, want %v", ms, want)
	}
}

func TestHostSource(t *testing.T) {
	ms := []m{{"/w", "/host/w"}, {"/w/sub", "/host/other"}, {"/w/sub/x", ""}}
	bind := func(x m) (string, string, bool) { return x.src, x.dst, x.src != "" }
	for p, want := range map[string]string{"/w/a": "/host/w/a", "/w/sub/y": "/host/other/y", "/w/sub/x": "/host/other/x", "/w": "/host/w"} {
		if got, ok := HostSource(p, ms, bind); !ok || got != want {
			t.Errorf("HostSource(%q) = %q %v, want %q", p, got, ok, want)
		}
	}
	if _, ok := HostSource("/elsewhere", ms, bind); ok {
		t.Error("HostSource found a bind for an uncovered path")
	}
}

func TestStateDir(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	want := "/run/user/1000/airlock/gvisor"
	if os.Geteuid() == 0 {
		want = "/run/airlock/gvisor"
	}
	if got := StateDir("gvisor"); got != want {
		t.Errorf("StateDir = %q, want %q", got, want)
	}
}
