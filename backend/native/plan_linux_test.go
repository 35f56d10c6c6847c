package native

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

func planPolicy(t *testing.T, ws string, edit func(*policy.Policy)) *policy.Policy {
	t.Helper()
	p, err := policy.Profile("default")
	if err != nil {
		t.Fatal(err)
	}
	p.Filesystem.Workspace = ws
	if edit != nil {
		edit(p)
	}
	r, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/nonexistent-home", UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func findOp(ops []mountOp, kind, dst string) int {
	for i, o := range ops {
		if o.Kind == kind && o.Dst == dst {
			return i
		}
	}
	return -1
}

func TestBuildPlan(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "secret"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(ws, "private"), 0o755)
	extra := t.TempDir()
	pol := planPolicy(t, ws, func(p *policy.Policy) {
		p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(ws, "secret"), filepath.Join(ws, "private"), "/nonexistent/x")
		p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, extra)
	})
	cache := t.TempDir()
	plan, err := buildPlan(pol, []sandbox.File{{Path: "/etc/airlock-ca.pem", Data: []byte("pem")}},
		[]sandbox.Bind{{Src: cache, Dst: "/home/x/.cache/go-build"}}, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 2 {
		t.Fatalf("buildPlan changed the workspace: %v", ents)
	}
	ops := plan.Mounts
	wsOp := findOp(ops, opBind, ws)
	if wsOp < 0 || ops[wsOp].RO {
		t.Fatalf("workspace not bound read-write: %+v", ops)
	}
	if i := findOp(ops, opBind, "/usr"); i < 0 || !ops[i].RO {
		t.Fatalf("/usr not bound read-only")
	}
	if i := findOp(ops, opBind, extra); i < 0 || ops[i].RO {
		t.Fatalf("read_write path not bound read-write")
	}
	tmp := findOp(ops, opTmpfs, "/tmp")
	if tmp < 0 {
		t.Fatal("no /tmp tmpfs")
	}
	// Parents before children: /tmp (holding the workspace) comes first.
	if strings.HasPrefix(ws, "/tmp/") && tmp > wsOp {
		t.Fatalf("/tmp mounted after the workspace below it")
	}
	ds, dd := findOp(ops, opDenyFile, filepath.Join(ws, "secret")), findOp(ops, opDenyDir, filepath.Join(ws, "private"))
	if ds < wsOp || dd < wsOp {
		t.Fatalf("deny ops missing or before the workspace bind: %d %d (ws %d)", ds, dd, wsOp)
	}
	if findOp(ops, opDenyFile, "/nonexistent/x") >= 0 || findOp(ops, opDenyDir, "/nonexistent/x") >= 0 {
		t.Fatal("deny op for a path that is not visible")
	}
	if i := findOp(ops, opFile, "/etc/airlock-ca.pem"); i < 0 || ops[i].Mode&0o222 != 0 {
		t.Fatal("injected file missing or writable")
	}
	if i := findOp(ops, opBind, "/home/x/.cache/go-build"); i < 0 || ops[i].RO || ops[i].Src != cache {
		t.Fatalf("cache not bound read-write at its place: %+v", ops)
	}
	// Landlock: the host-backed writable binds grant no write right (the
	// mediator writes there); /tmp does; /usr is read+exec only.
	rights := map[string]uint64{}
	for _, r := range plan.Landlock {
		rights[r.Path] |= r.Access
	}
	for _, p := range []string{ws, extra, "/home/x/.cache/go-build"} {
		if rights[p] != llMediated {
			t.Errorf("landlock rights of %s: %#x, want %#x (read, exec, remove)", p, rights[p], llMediated)
		}
	}
	if rights["/tmp"]&llWriteFile == 0 || rights["/usr"]&llWriteFile != 0 || rights["/usr"]&llExecute == 0 {
		t.Fatalf("landlock rights wrong: /tmp %#x /usr %#x", rights["/tmp"], rights["/usr"])
	}
	if !slices.Contains(plan.Mediated, ws) || !slices.Contains(plan.Mediated, extra) || len(plan.Mediated) != 3 {
		t.Errorf("mediated %v", plan.Mediated)
	}
	if !slices.Contains(plan.Private, filepath.Join(ws, "secret")) || !slices.Contains(plan.Private, filepath.Join(ws, "private")) {
		t.Errorf("deny masks below the workspace not private: %v", plan.Private)
	}
	// Nothing is bound over the workspace's own entries: no placeholder,
	// no self-bind of protected files (the mediator decides every write).
	for _, o := range ops {
		if o.Kind == opBind && o.Src == o.Dst && strings.HasPrefix(o.Dst, ws+"/") {
			t.Errorf("bind inside the workspace: %+v", o)
		}
	}
	// Without mediation (degraded), the workspace is plainly writable.
	plain, err := buildPlan(pol, nil, nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plain.Landlock {
		if r.Path == ws && r.Access != llReadWrite {
			t.Errorf("unmediated workspace rights %#x", r.Access)
		}
	}
	if len(plain.Mediated) != 0 {
		t.Errorf("unmediated plan lists mediated binds %v", plain.Mediated)
	}
}

func TestBuildPlanErrors(t *testing.T) {
	ws := t.TempDir()
	cases := []struct {
		name  string
		edit  func(*policy.Policy)
		files []sandbox.File
		want  string
	}{
		{"missing read_only", func(p *policy.Policy) { p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, "/nonexistent/ro") }, nil, "read_only path /nonexistent/ro"},
		{"missing read_write", func(p *policy.Policy) { p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, "/nonexistent/rw") }, nil, "read_write path /nonexistent/rw"},
		{"missing rootfs", func(p *policy.Policy) { p.Filesystem.Rootfs = "/nonexistent/rootfs" }, nil, "rootfs /nonexistent/rootfs"},
		{"relative file", nil, []sandbox.File{{Path: "etc/x"}}, "not absolute"},
		{"unclean file", nil, []sandbox.File{{Path: "/etc/../x"}}, "not absolute and clean"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := planPolicy(t, ws, c.edit)
			_, err := buildPlan(pol, c.files, nil, false, true)
			if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrInvalid containing %q", err, c.want)
			}
			if ents, _ := os.ReadDir(ws); len(ents) != 0 {
				t.Fatalf("left in workspace: %v", ents)
			}
		})
	}
}

func TestSortMounts(t *testing.T) {
	ops := []mountOp{
		{Kind: opBind, Dst: "/tmp/a/ws"},
		{Kind: opDenyFile, Dst: "/etc/shadow"},
		{Kind: opBind, Dst: "/etc"},
		{Kind: opTmpfs, Dst: "/tmp"},
		{Kind: opDenyDir, Dst: "/etc"},
		{Kind: opBind, Dst: "/etc"},
	}
	sortMounts(ops)
	got := []string{}
	for _, o := range ops {
		got = append(got, o.Kind+":"+o.Dst)
	}
	want := "bind:/etc tmpfs:/tmp bind:/etc denydir:/etc denyfile:/etc/shadow bind:/tmp/a/ws"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

func TestDetectCgroups(t *testing.T) {
	dir := t.TempDir()
	mi := filepath.Join(dir, "mountinfo")
	cg := filepath.Join(dir, "cgroup")
	os.WriteFile(mi, []byte(`31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`), 0o644)
	os.WriteFile(cg, []byte("4:memory:/user.slice\n2:cpu,cpuacct:/\n0::/user.slice/x.scope\n"), 0o644)
	h := detectCgroups(mi, cg)
	if h.v2Mount != "/sys/fs/cgroup/unified" || h.v1Mount["memory"] != "/sys/fs/cgroup/memory" || h.v1Mount["cpuacct"] != "/sys/fs/cgroup/cpu,cpuacct" {
		t.Fatalf("mounts: %+v", h)
	}
	if h.v1Own["memory"] != "/user.slice" || h.v2Own != "/user.slice/x.scope" {
		t.Fatalf("own cgroups: %+v", h)
	}
	if got := h.v2Parent(""); got != "/sys/fs/cgroup/unified/user.slice/airlock" {
		t.Fatalf("v2 parent %q", got)
	}
	if got := h.v1Parent("memory", "custom"); got != "/sys/fs/cgroup/memory/custom" {
		t.Fatalf("v1 parent %q", got)
	}
}
