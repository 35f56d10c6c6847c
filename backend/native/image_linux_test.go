package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

// imageSpec is a busybox image sandbox with workspace ws.
func imageSpec(t *testing.T, ws string) sandbox.Spec {
	t.Helper()
	p, _ := policy.Profile("default")
	spec := imagestest.Spec(t, imagestest.BusyboxRoot(t), p, ws)
	spec.ID = newID(t)
	return spec
}

func TestImageSandbox(t *testing.T) {
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := imageSpec(t, ws)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	for _, c := range []struct{ script, want string }{
		{"pwd", "/workspace"},
		{"cat /workspace/hello.txt", "from the host"},
		{"echo $IMAGE_VAR $HOME $PATH", "from-image /root /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		{"cat /etc/hostname", "busybox"},
		{"ls /usr/lib/os-release /etc/debian_version 2>&1 | wc -l; test -e /bin/busybox && echo image", "2\nimage"},
		// The root is writable (the sandbox's own layer) ...
		{"echo new > /etc/motd && mkdir -p /usr/x && echo ok > /usr/x/y && cat /etc/motd /usr/x/y && rm /etc/hostname && ls /etc/hostname 2>&1", "new\nok\nls: /etc/hostname: No such file or directory"},
		// With a workspace mounted at /workspace, / itself takes no new
		// entry (a write right there would reach the workspace).
		{"mkdir /opt 2>&1 || echo refused", "refused"},
		// ... the workspace is too, through the mediator, and protected config is not.
		{"echo w > /workspace/out.txt && cat /workspace/out.txt", "w"},
		{"mkdir -p /workspace/.git/hooks 2>&1; echo x > /workspace/.envrc 2>&1 || echo refused", "refused"},
	} {
		st, out := sh(t, sb, c.script)
		if !strings.Contains(out, c.want) {
			t.Errorf("%q: exit %d, %q; want %q", c.script, st.Code, out, c.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "w\n" {
		t.Errorf("workspace write on the host: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".envrc")); err == nil {
		t.Errorf(".envrc written on the host")
	}
	// The image layer is untouched by the sandbox's writes.
	r := imagestest.BusyboxRoot(t)
	if b, err := os.ReadFile(filepath.Join(r.Layers[0], "etc/hostname")); err != nil || string(b) != "busybox\n" {
		t.Errorf("image layer changed: %q %v", b, err)
	}
	wdir := filepath.Join(b.cfg.WritableDir, spec.ID)
	if _, err := os.Stat(filepath.Join(wdir, "upper", "etc", "motd")); err != nil {
		t.Errorf("write not in the sandbox's writable layer: %v", err)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wdir); !os.IsNotExist(err) {
		t.Errorf("writable layer left after destroy: %v", err)
	}
}

// Two sandboxes of one image do not see each other's writes.
func TestImageSandboxesAreSeparate(t *testing.T) {
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	ctx := context.Background()
	var sbs []sandbox.Sandbox
	for i := 0; i < 2; i++ {
		sb, err := b.Create(ctx, imageSpec(t, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy(ctx)
		sbs = append(sbs, sb)
	}
	// Without a workspace the whole root is writable, / included.
	if st, out := sh(t, sbs[0], "echo one > /root/mark && mkdir /opt && echo ok"); st.Code != 0 || out != "ok" {
		t.Errorf("writes without a workspace: %d %q", st.Code, out)
	}
	if _, out := sh(t, sbs[1], "cat /root/mark 2>&1; pwd"); !strings.Contains(out, "No such file") || !strings.HasSuffix(out, "/") {
		t.Errorf("second sandbox: %q", out)
	}
}

// Per-exec users, resolved with the image's /etc/passwd; a user the
// sandbox cannot switch to (it holds no capability over other ids) is a
// clear refusal, never the default user silently.
func TestImageExecUser(t *testing.T) {
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	ctx := context.Background()
	sb, err := b.Create(ctx, imageSpec(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	run := func(user string) (string, error) {
		var out strings.Builder
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"id", "-u"}, User: user, Stdout: &out})
		if err != nil {
			return "", err
		}
		p.Wait(ctx)
		return strings.TrimSpace(out.String()), nil
	}
	for _, u := range []string{"", "root", "0", "0:0", "root:root"} {
		if got, err := run(u); err != nil || got != "0" {
			t.Errorf("user %q: %q %v", u, got, err)
		}
	}
	if _, err := run("user"); !errors.Is(err, sandbox.ErrPermission) || !strings.Contains(err.Error(), "uid 1000") {
		t.Errorf("user 1000 in a one-uid sandbox: %v, want a permission error naming the uid", err)
	}
	if _, err := run("nosuch"); !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "/etc/passwd") {
		t.Errorf("unknown user: %v", err)
	}
}

// A sandbox cannot change the image for anyone else: what it writes,
// truncates, removes or re-modes in its root lands in its own writable
// layer; the shared layer on the host and a second sandbox of the image
// are untouched. Set-id bits and hard links into the workspace are
// refused as everywhere.
func TestImageLayerTamper(t *testing.T) {
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	ctx := context.Background()
	layer := imagestest.BusyboxRoot(t).Layers[0]
	sum := func() string {
		out, err := exec.Command("sh", "-c", "cd "+layer+" && find . -type f -exec sha256sum {} + | sort | sha256sum; find . | wc -l; stat -c '%a %u' bin/busybox etc/passwd").Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	before := sum()
	ws := workspace(t)
	a, err := b.Create(ctx, imageSpec(t, ws))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy(ctx)
	_, out := sh(t, a, `: > /bin/busybox.copy; echo 'evil::0:0::/:/bin/sh' >> /etc/passwd; rm -f /etc/group; chmod 777 /etc/passwd;
chmod u+s /etc/passwd 2>&1 || echo setuid-refused; ln /etc/passwd /workspace/pw 2>&1 || echo link-refused; echo done`)
	if !strings.Contains(out, "setuid-refused") || !strings.Contains(out, "link-refused") || !strings.Contains(out, "done") {
		t.Errorf("tamper run: %q", out)
	}
	if _, err := os.Lstat(filepath.Join(ws, "pw")); err == nil {
		t.Error("hard link from the image root into the workspace")
	}
	c, err := b.Create(ctx, imageSpec(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	if _, out := sh(t, c, "grep -c evil /etc/passwd; ls /etc/group; stat -c %a /etc/passwd"); out != "0\n/etc/group\n644" {
		t.Errorf("second sandbox sees the first one's changes: %q", out)
	}
	if after := sum(); after != before {
		t.Errorf("the shared layer changed on the host:\nbefore %s\nafter  %s", before, after)
	}
}

// The Debian image (mmdebstrap, minbase) runs: bash, dpkg, apt, its own
// libc; nothing of the host's /usr.
func TestImageDebian(t *testing.T) {
	b := testBackend(t)
	b.cfg.WritableDir = t.TempDir()
	ctx := context.Background()
	p, _ := policy.Profile("default")
	spec := imagestest.Spec(t, imagestest.DebianRoot(t), p, workspace(t))
	spec.ID = newID(t)
	sb, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	st, out := sh(t, sb, `cat /etc/debian_version; bash -c 'echo bash $BASH_VERSINFO'; dpkg-query -W -f='${Package}\n' dpkg; apt-get --version | head -1; pwd; ls /usr/bin/go 2>&1`)
	if st.Code != 0 && !strings.Contains(out, "No such file") || !strings.HasPrefix(out, "12.") || !strings.Contains(out, "bash 5") || !strings.Contains(out, "\ndpkg\n") || !strings.Contains(out, "apt ") || !strings.Contains(out, "/workspace") || !strings.Contains(out, "No such file") {
		t.Errorf("debian image: %d %q", st.Code, out)
	}
}

// Another backend's Cleanup (a server starting, another test) never
// touches this one's writable layers: each state dir has its own.
func TestImageCleanupOfAnotherStateKeepsLayers(t *testing.T) {
	testutil.RequireRoot(t)
	// Separate cgroup parents, as Cleanup's contract asks of independent
	// backends; the writable dirs follow the state dirs by themselves.
	a := New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir(), CgroupParent: fmt.Sprintf("airlock-t-a-%d", os.Getpid())})
	other := New(Config{AgentBinary: testutil.AirlockBinary(t), StateDir: t.TempDir(), CgroupParent: fmt.Sprintf("airlock-t-b-%d", os.Getpid())})
	t.Cleanup(func() {
		for _, b := range []*Backend{a, other} {
			h := hostCgroups()
			if p := h.v2Parent(b.cfg.CgroupParent); p != "" {
				os.Remove(p)
			}
			for c := range h.v1Mount {
				os.Remove(h.v1Parent(c, b.cfg.CgroupParent))
			}
		}
	})
	if a.cfg.WritableDir == other.cfg.WritableDir {
		t.Fatalf("two state dirs share the writable dir %s", a.cfg.WritableDir)
	}
	ctx := context.Background()
	sb, err := a.Create(ctx, imageSpec(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)
	if err := other.Cleanup(ctx, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if st, out := sh(t, sb, "echo x > /root/after && cat /root/after /etc/hostname"); st.Code != 0 || out != "x\nbusybox" {
		t.Errorf("after another backend's cleanup: %d %q", st.Code, out)
	}
}
