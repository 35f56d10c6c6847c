package gvisor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func mountAt(ms []ociMount, dst string) []ociMount {
	var out []ociMount
	for _, m := range ms {
		if m.Destination == dst {
			out = append(out, m)
		}
	}
	return out
}

func TestPlanMounts(t *testing.T) {
	ws := workspace(t)
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "config"), nil, 0o644)
	os.WriteFile(filepath.Join(ws, "secret"), nil, 0o644)
	ro := t.TempDir()
	bundle := t.TempDir()
	pol := testPolicy(t, ws, func(p *policy.Policy) {
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, ro)
		p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(ws, "secret"), "/nonexistent/x")
	})
	guard := pol.ConfigGuard("/root")
	plan, err := planMounts(planInput{Policy: pol, Bundle: bundle, UID: 1000, GID: 1000, Guard: guard,
		Files: []sandbox.File{{Path: "/run/airlock/ca.pem", Data: []byte("pem")}}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(dst, typ string, wantOpt ...string) {
		t.Helper()
		ms := mountAt(plan.Mounts, dst)
		if len(ms) == 0 {
			t.Errorf("no mount at %s", dst)
			return
		}
		m := ms[len(ms)-1] // the top one
		if m.Type != typ {
			t.Errorf("%s: type %s, want %s", dst, m.Type, typ)
		}
		for _, o := range wantOpt {
			if !slices.Contains(m.Options, o) {
				t.Errorf("%s: options %q lack %q", dst, m.Options, o)
			}
		}
	}
	check(ws, "bind", "rw")
	check(ro, "bind", "ro")
	check("/usr", "bind", "ro")
	check("/etc", "bind", "ro")
	check("/proc", "proc")
	check("/tmp", "tmpfs", "mode=1777")
	check("/root", "tmpfs", "uid=1000", "gid=1000")
	check("/run/airlock/ca.pem", "bind", "ro")
	check(AgentPath, "bind", "ro")
	if ms := mountAt(plan.Mounts, filepath.Join(ws, "secret")); len(ms) != 1 || filepath.Base(ms[0].Source) != bundleDenyFile {
		t.Errorf("deny file mounts %+v", ms)
	}
	if ms := mountAt(plan.Mounts, "/etc/shadow"); len(ms) != 1 || filepath.Base(ms[0].Source) != bundleDenyFile {
		t.Errorf("/etc/shadow mounts %+v", ms)
	}
	if len(mountAt(plan.Mounts, "/nonexistent/x")) != 0 {
		t.Error("mount for a deny path that does not exist")
	}
	// Parents before children.
	seen := map[string]int{}
	for i, m := range plan.Mounts {
		seen[m.Destination] = i
	}
	for i, m := range plan.Mounts {
		for d, j := range seen {
			if strings.HasPrefix(m.Destination, d+"/") && j > i {
				t.Errorf("%s mounted before its parent %s", m.Destination, d)
			}
		}
	}
	// Protected config: the writable host paths go behind an overlay and
	// come back through write-back; the deny mask below is never synced.
	if !plan.Overlay || !slices.Equal(plan.OverlayRoots, []string{ws}) || !slices.Contains(plan.OverlaySkip, filepath.Join(ws, "secret")) {
		t.Errorf("overlay %v roots %v skip %v", plan.Overlay, plan.OverlayRoots, plan.OverlaySkip)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 2 {
		t.Errorf("planning changed the workspace: %v", ents)
	}
	off := false
	plain := testPolicy(t, ws, func(p *policy.Policy) { p.Filesystem.ProtectConfig = &off })
	if pp, err := planMounts(planInput{Policy: plain, Bundle: t.TempDir(), Guard: plain.ConfigGuard("/root")}); err != nil || pp.Overlay {
		t.Errorf("protect_config off: overlay %v, err %v", pp.Overlay, err)
	}
}

func TestPlanMountsRootfs(t *testing.T) {
	ws := workspace(t)
	rootfs := t.TempDir()
	for _, d := range []string{"usr", "etc", "proc", "tmp"} {
		os.Mkdir(filepath.Join(rootfs, d), 0o755)
	}
	os.Symlink("usr/bin", filepath.Join(rootfs, "bin"))
	pol := testPolicy(t, ws, func(p *policy.Policy) { p.Filesystem.Rootfs = rootfs })
	plan, err := planMounts(planInput{Policy: pol, Rootfs: pol.Filesystem.Rootfs, Bundle: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if ms := mountAt(plan.Mounts, "/usr"); len(ms) != 1 || ms[0].Source != filepath.Join(rootfs, "usr") {
		t.Errorf("/usr mounts %+v, want the rootfs's", ms)
	}
	if plan.Links["bin"] != "usr/bin" {
		t.Errorf("links %v, want bin -> usr/bin", plan.Links)
	}
	for _, m := range plan.Mounts {
		if m.Type == "bind" && m.Destination == "/proc" {
			t.Errorf("rootfs /proc bound: %+v", m)
		}
	}
}

func TestWriteBundle(t *testing.T) {
	ws := workspace(t)
	dir := t.TempDir()
	pol := testPolicy(t, ws, func(p *policy.Policy) { p.Filesystem.ProtectConfig = new(bool) })
	plan, err := planMounts(planInput{Policy: pol, Bundle: dir, Files: []sandbox.File{{Path: "/run/airlock/x.pem", Data: []byte("pem"), Mode: 0o644}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range plan.Mounts {
		if plan.Mounts[i].Destination == AgentPath {
			plan.Mounts[i].Source = "/bin/true"
		}
	}
	spec := buildSpec(specInput{ID: "x", Policy: pol, UID: 1000, GID: 1000, Mounts: plan.Mounts})
	if err := writeBundle(dir, spec, plan); err != nil {
		t.Fatal(err)
	}
	var got ociSpec
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil || json.Unmarshal(b, &got) != nil {
		t.Fatalf("config.json: %v", err)
	}
	if !got.Root.Readonly || got.Process.User.UID != 1000 || !got.Process.NoNewPrivileges || len(got.Process.Capabilities.Bounding) != 0 {
		t.Errorf("spec %+v", got)
	}
	if got.Linux.Seccomp == nil || len(got.Linux.Seccomp.Syscalls) == 0 {
		t.Errorf("no seccomp profile: %+v", got.Linux)
	}
	var nproc bool
	for _, r := range got.Process.Rlimits {
		nproc = nproc || r.Type == "RLIMIT_NPROC" && r.Hard == uint64(pol.Limits.Pids)
	}
	if !nproc {
		t.Errorf("no RLIMIT_NPROC for pids %d: %+v", pol.Limits.Pids, got.Process.Rlimits)
	}
	for _, p := range []string{"rootfs/.airlock/airlock", "rootfs/proc", "rootfs/usr", "rootfs/tmp"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("skeleton lacks %s: %v", p, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "rootfs/bin")); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		if hf, err := os.Lstat("/bin"); err == nil && hf.Mode()&os.ModeSymlink != 0 {
			t.Error("/bin is a symlink on the host but not in the skeleton")
		}
	}
	for _, n := range []string{bundleDenyDir, bundleDenyFile} {
		if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.Mode().Perm() != 0 {
			t.Errorf("%s: %v mode %v, want 000", n, err, fi.Mode())
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, bundleFiles, "0")); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("injected file: %v, want mode 0444 (write bits dropped)", err)
	}
}

func TestMountPointNeverFollowsLinks(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	if err := mountPoint(root, "/lib/evil/dir", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "evil")); err == nil {
		t.Fatal("mountPoint created a directory through a symlink")
	}
	if err := mountPoint(root, "/a/../b", true); err == nil {
		t.Fatal("mountPoint accepted ..")
	}
}
