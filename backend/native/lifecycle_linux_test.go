package native

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/airlock-dev/airlock/internal/testutil"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/audit"
	"github.com/airlock-dev/airlock/backend/internal/hostfs"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// leaks lists what sandbox id left on the host: cgroup directories, state,
// processes whose command line carries marker.
func leaks(b *Backend, id, marker string) []string {
	var out []string
	h := hostCgroups()
	dirs := []string{}
	if p := h.v2Parent(b.cfg.CgroupParent); p != "" {
		dirs = append(dirs, filepath.Join(p, id))
	}
	for c := range h.v1Mount {
		dirs = append(dirs, filepath.Join(h.v1Parent(c, b.cfg.CgroupParent), id))
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			out = append(out, "cgroup "+d)
		}
	}
	if _, err := os.Stat(b.lockPath(id)); err == nil {
		out = append(out, "state "+b.lockPath(id))
	}
	if marker != "" {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && strings.Contains(string(cmd), marker) {
				out = append(out, "process "+e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
			}
		}
	}
	return out
}

func TestDaemonDoesNotSurviveDestroy(t *testing.T) {
	mountsBefore, _ := os.ReadFile("/proc/self/mountinfo")
	f := newFixture(t, nil, nil)
	const marker = "86399.123"
	out := f.attack(t, "daemon", marker)
	mustOK(t, "daemonise", out)
	if got := leaks(f.b, "", marker); len(got) == 0 {
		t.Fatal("daemon not running before destroy: the check below would be vacuous")
	}
	id := f.sb.ID()
	if err := f.sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := leaks(f.b, id, marker); len(got) > 0 {
		t.Fatalf("left behind: %v", got)
	}
	// The host's mount table has nothing of the sandbox (every mount lived
	// in its mount namespace) and no state was left (the backend makes no
	// temp dirs; the workspace placeholders are checked elsewhere). Other
	// tests (other packages, in parallel) may mount and unmount their own
	// meanwhile: only new mounts naming this sandbox count.
	mountsAfter, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mountsAfter), "\n") {
		if line != "" && !strings.Contains(string(mountsBefore), line) &&
			(strings.Contains(line, f.ws) || strings.Contains(line, id) || strings.Contains(line, f.b.cfg.StateDir)) {
			t.Errorf("host mount left by the sandbox: %s", line)
		}
	}
	if ents, _ := os.ReadDir(f.b.cfg.StateDir); len(ents) != 0 {
		t.Fatalf("state left: %v", ents)
	}
	if _, err := f.sb.Exec(context.Background(), sandbox.ExecRequest{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("exec after destroy: %v, want ErrClosed", err)
	}
	if err := f.sb.Destroy(context.Background()); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
}

func TestWallTimeout(t *testing.T) {
	events := newEventLog()
	b := testBackend(t)
	ws := workspace(t)
	pol := testPolicy(t, ws, func(p *policy.Policy) { p.Limits.Timeout = policy.Duration(time.Second) })
	ctx := context.Background()
	sb, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: pol, Audit: events})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := p.Wait(wctx)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if !st.TimedOut || st.Signal != sandbox.SIGKILL {
		t.Fatalf("status %+v, want timed out by SIGKILL", st)
	}
	select {
	case <-sb.Done():
	case <-wctx.Done():
		t.Fatal("Done not closed after the timeout")
	}
	if events.count(audit.TypeLimit) == 0 {
		t.Fatal("no limit event for the timeout")
	}
	if got := leaks(b, sb.ID(), ""); len(got) > 0 {
		t.Fatalf("left behind: %v", got)
	}
}

func TestMemoryLimit(t *testing.T) {
	if HostFeatures().CgroupReason != "" && !strings.Contains(strings.Join(HostFeatures().CgroupControllers, ","), "memory") {
		testutil.Skip(t, "no memory controller")
	}
	f := newFixture(t, func(ws string, p *policy.Policy) { p.Limits.Memory = 64 << 20 }, nil)
	f.b.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	mustOK(t, "unconfined alloc", unconfined(t, f.att, "alloc", "200"))
	ctx := context.Background()
	p, err := f.sb.Exec(ctx, sandbox.ExecRequest{Args: []string{f.att, "alloc", "200"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.OOM || st.Signal != sandbox.SIGKILL {
		t.Fatalf("status %+v, want OOM kill", st)
	}
	stats, _ := f.sb.Stats(ctx)
	if stats.MemoryPeakBytes < 32<<20 || stats.MemoryPeakBytes > 80<<20 {
		t.Fatalf("peak memory %d, want about the 64 MiB limit", stats.MemoryPeakBytes)
	}
	// The sandbox (and the host) carry on.
	if st, out := sh(t, f.sb, "echo alive"); st.Code != 0 || out != "alive" {
		t.Fatalf("after OOM: %+v %q", st, out)
	}
	if f.audit.count(audit.TypeLimit) == 0 {
		t.Fatal("no limit event for the OOM kill")
	}
}

func TestPidsLimit(t *testing.T) {
	f := newFixture(t, func(ws string, p *policy.Policy) { p.Limits.Pids = 24 }, nil)
	mustOK(t, "unconfined fork", unconfined(t, f.att, "fork", "40"))
	mustDeny(t, "fork bomb", f.attack(t, "fork", "40"), "resource temporarily unavailable")
	if st, out := sh(t, f.sb, "echo alive"); st.Code != 0 || out != "alive" {
		t.Fatalf("after fork limit: %+v %q", st, out)
	}
}

func TestCreateFailureLeavesNothing(t *testing.T) {
	b := testBackend(t)
	cases := []struct {
		name string
		edit func(ws string, p *policy.Policy)
		spec func(s *sandbox.Spec)
		kind error
	}{
		{"missing read_only path", func(ws string, p *policy.Policy) {
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, "/nonexistent/airlock")
		}, nil, sandbox.ErrInvalid},
		{"missing rootfs", func(ws string, p *policy.Policy) { p.Filesystem.Rootfs = "/nonexistent/rootfs" }, nil, sandbox.ErrInvalid},
		{"init fails mid-setup", nil, func(s *sandbox.Spec) {
			// A file under a read-only tree where no mount point exists:
			// the init fails after the cgroup and state were made.
			s.Files = []sandbox.File{{Path: "/usr/airlock-missing-dir/ca.pem", Data: []byte("x")}}
		}, sandbox.ErrUnavailable},
		{"bad id", nil, func(s *sandbox.Spec) { s.ID = "../evil" }, sandbox.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := workspace(t)
			pol := testPolicy(t, ws, func(p *policy.Policy) {
				if c.edit != nil {
					c.edit(ws, p)
				}
			})
			spec := sandbox.Spec{ID: newID(t), Policy: pol}
			if c.spec != nil {
				c.spec(&spec)
			}
			_, err := b.Create(context.Background(), spec)
			if !errors.Is(err, c.kind) {
				t.Fatalf("err %v, want %v", err, c.kind)
			}
			t.Logf("error: %v", err)
			if got := leaks(b, spec.ID, ""); len(got) > 0 {
				t.Fatalf("left behind: %v", got)
			}
			ents, _ := os.ReadDir(ws)
			if len(ents) != 0 {
				t.Fatalf("workspace not empty after failed create: %v", ents)
			}
		})
	}
}

func TestCleanupRemovesLeftovers(t *testing.T) {
	b := testBackend(t)
	id := newID(t)
	// Simulate a crashed host: a lock file nobody holds and the cgroup.
	lock, err := b.lockState(id)
	if err != nil {
		t.Fatal(err)
	}
	lock.Close() // the process "died": the kernel dropped its lock
	if _, _, err := newCgroup(hostCgroups(), b.cfg.CgroupParent, id, cgroupLimits{Pids: 10}); err != nil {
		t.Fatal(err)
	}
	// A live sandbox of another process (its lock held) must survive.
	liveID := newID(t)
	live, err := b.lockState(liveID)
	if err != nil {
		t.Fatal(err)
	}
	defer b.unlockState(liveID, live)
	liveCg, _, err := newCgroup(hostCgroups(), b.cfg.CgroupParent, liveID, cgroupLimits{Pids: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer liveCg.remove()
	// A placeholder an earlier version left, with its state file.
	ws := workspace(t)
	old := filepath.Join(ws, ".bashrc")
	if err := os.WriteFile(old, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	syscall.Stat(old, &st)
	legacy, _ := json.Marshal(map[string]any{"placeholders": []hostfs.Placeholder{{Path: old, Dev: uint64(st.Dev), Ino: st.Ino}}})
	legacyID := newID(t)
	os.WriteFile(filepath.Join(b.cfg.StateDir, legacyID+".json"), legacy, 0o600)

	if err := b.Cleanup(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := leaks(b, id, ""); len(got) > 0 {
		t.Fatalf("left behind: %v", got)
	}
	if _, err := os.Stat(b.lockPath(liveID)); err != nil {
		t.Fatalf("a live sandbox's lock was reclaimed: %v", err)
	}
	if liveCg.v2Dir != "" {
		if _, err := os.Stat(liveCg.v2Dir); err != nil {
			t.Fatalf("a live sandbox's cgroup was removed: %v", err)
		}
	}
	if _, err := os.Lstat(old); err == nil {
		t.Fatal("legacy placeholder left in the workspace")
	}
}

// A run killed with SIGKILL leaves its cgroup; the next create reclaims it.
func TestCreateReclaimsDeadRuns(t *testing.T) {
	b := testBackend(t)
	id := newID(t)
	lock, err := b.lockState(id)
	if err != nil {
		t.Fatal(err)
	}
	lock.Close()
	if _, _, err := newCgroup(hostCgroups(), b.cfg.CgroupParent, id, cgroupLimits{Pids: 10}); err != nil {
		t.Fatal(err)
	}
	ws := workspace(t)
	sb, err := b.Create(context.Background(), sandbox.Spec{ID: newID(t), Policy: testPolicy(t, ws, nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if got := leaks(b, id, ""); len(got) > 0 {
		t.Fatalf("dead run not reclaimed: %v", got)
	}
}

func TestRootfs(t *testing.T) {
	b := testBackend(t)
	rootfs := t.TempDir()
	os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755)
	os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755)
	os.WriteFile(filepath.Join(rootfs, "etc", "os-release"), []byte("ID=airlock-test\n"), 0o644)
	data, _ := os.ReadFile(attackBinary(t))
	os.WriteFile(filepath.Join(rootfs, "bin", "attack"), data, 0o755)
	ws := workspace(t)
	pol := testPolicy(t, ws, func(p *policy.Policy) {
		p.Filesystem.ReadOnly, p.Filesystem.Deny, p.Filesystem.Rootfs = nil, nil, rootfs
	})
	ctx := context.Background()
	// A directory as Spec.Image was the old form: refused, saying where
	// a root directory goes now.
	if _, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: pol, Image: rootfs}); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "filesystem.rootfs") {
		t.Errorf("directory as image: %v", err)
	}
	sb, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	run := func(args ...string) string {
		var out strings.Builder
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: args, Stdout: &out, Stderr: &out})
		if err != nil {
			return "exec error: " + err.Error()
		}
		p.Wait(ctx)
		return strings.TrimSpace(out.String())
	}
	mustOK(t, "read rootfs file", run("/bin/attack", "read", "/etc/os-release"))
	mustDeny(t, "host /usr is not there", run("/bin/attack", "read", "/usr/bin/env"), "no such file")
	mustDeny(t, "rootfs is read-only", run("/bin/attack", "write", "/etc/os-release"), "read-only", "permission denied")
	mustOK(t, "workspace writable", run("/bin/attack", "write", filepath.Join(ws, "x")))
}

func TestPolicyUID(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	os.Chmod(filepath.Dir(ws), 0o755) // uid 1000 must be able to reach it
	os.Chmod(filepath.Dir(filepath.Dir(ws)), 0o755)
	os.Chown(ws, 1000, 1000)
	pol := testPolicy(t, ws, func(p *policy.Policy) {
		uid, gid := 1000, 1000
		p.Process.UID, p.Process.GID = &uid, &gid
	})
	ctx := context.Background()
	sb, err := b.Create(ctx, sandbox.Spec{ID: newID(t), Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	st, out := sh(t, sb, "id -u; id -g; touch "+filepath.Join(ws, "mine")+" && stat -c %u "+filepath.Join(ws, "mine"))
	if st.Code != 0 || out != "1000\n1000\n1000" {
		t.Fatalf("got %+v %q, want uid/gid 1000 and files owned by 1000", st, out)
	}
	var host syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "mine"), &host); err != nil || host.Uid != 1000 {
		t.Fatalf("host owner of a file made inside: %d %v", host.Uid, err)
	}
}

// TestDirectMode: the init runs a command itself (no agent) under the same
// confinement: the backend's own check of its layers, independent of the
// agent protocol.
func TestDirectMode(t *testing.T) {
	b := testBackend(t)
	ws := workspace(t)
	code, out := runDirect(t, b, testPolicy(t, ws, nil), "/bin/sh", "-c", "cat /etc/shadow; touch "+ws+"/.envrc; echo ok > "+ws+"/f; exit 7")
	if code != 7 {
		t.Fatalf("exit %d, want 7: %s", code, out)
	}
	if !strings.Contains(out, "shadow") || !strings.Contains(out, ".envrc") {
		t.Errorf("the direct child was not refused: %q", out)
	}
	if _, err := os.Stat(filepath.Join(ws, ".envrc")); err == nil {
		t.Error(".envrc created")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "ok\n" {
		t.Errorf("workspace write: %q", b)
	}
}
