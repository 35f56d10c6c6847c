package oci

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/backend/internal/cgroupfs"
	"github.com/airlock-dev/airlock/backend/native"
)

// Landlock grants a path the union of its ancestors' rules: the
// read-write grant must go on the siblings of read-only and mediated
// paths, never on an ancestor of one.
func TestLandlockRulesNeverCoverSpecialPaths(t *testing.T) {
	tree := map[string][]dirEntry{
		"/":        {{"/bin", true}, {"/etc", true}, {"/var", true}, {"/init", false}},
		"/var":     {{"/var/lib", true}, {"/var/log", true}},
		"/var/lib": {{"/var/lib/data", true}, {"/var/lib/other", true}, {"/var/lib/f", false}},
	}
	c := &confinement{ReadOnlyPaths: []string{"/bin", "/etc"}, MediatedPaths: []string{"/var/lib/data"}}
	rules := c.landlockRules(func(d string) []dirEntry { return tree[d] })
	got := map[string]uint64{}
	for _, r := range rules {
		got[r.Path] = r.Access
	}
	rw := native.LandlockReadWrite &^ native.LandlockMakeDevice
	want := map[string]uint64{
		"/": native.LandlockReadExec, "/bin": native.LandlockReadExec, "/etc": native.LandlockReadExec,
		"/init": rw & native.LandlockFileRights, "/var": native.LandlockReadExec, "/var/log": rw,
		"/var/lib": native.LandlockReadExec, "/var/lib/data": native.LandlockMediated,
		"/var/lib/other": rw, "/var/lib/f": rw & native.LandlockFileRights,
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("%s: access %#x, want %#x", p, got[p], a)
		}
	}
	if len(got) != len(want) {
		t.Errorf("rules %v, want exactly %v", got, want)
	}
	for p, a := range got {
		if a&native.LandlockMakeDevice != 0 {
			t.Errorf("%s may make device nodes", p)
		}
	}
	// Without special paths: one rule.
	if r := (&confinement{}).landlockRules(func(string) []dirEntry { return nil }); len(r) != 1 || r[0].Path != "/" {
		t.Errorf("plain: %v", r)
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"a", "abc-DEF_1.2+3", "0123456789abcdef"} {
		if checkID(id) != nil {
			t.Errorf("%q refused", id)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "../x", "a b", "a\x00"} {
		if checkID(id) == nil {
			t.Errorf("%q accepted", id)
		}
	}
}

// On a cgroup2-only host the controllers a limit needs are offered down
// the container's ancestors, from the hierarchy's root.
func TestEnableV2Ancestors(t *testing.T) {
	mount := t.TempDir()
	rel := "/k8s.io/pod/ctr"
	if err := os.MkdirAll(filepath.Join(mount, rel), 0o755); err != nil {
		t.Fatal(err)
	}
	enableV2(filepath.Join(mount, rel), rel, cgroupfs.Limits{Pids: 10}, nil)
	for _, d := range []string{"", "/k8s.io", "/k8s.io/pod"} {
		b, err := os.ReadFile(filepath.Join(mount, d, "cgroup.subtree_control"))
		if err != nil || string(b) != "+pids" {
			t.Errorf("%s: %q %v", d, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(mount, rel, "cgroup.subtree_control")); err == nil {
		t.Error("the container's own cgroup must not offer controllers (it holds processes)")
	}
}
