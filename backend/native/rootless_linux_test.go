package native

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

const childEnv = "AIRLOCK_NATIVE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "rootless" {
		os.Exit(rootlessChild())
	}
	os.Exit(m.Run())
}

// rootlessResult is what the unprivileged child reports.
type rootlessResult struct {
	LimitsErr string `json:"limits_err"`
	UID       string `json:"uid"`
	Wrote     bool   `json:"wrote"`
	Shadow    string `json:"shadow"`
	// Image is what an image sandbox of a store this user owns printed.
	Image string `json:"image"`
	Err   string `json:"err,omitempty"`
}

// rootlessChild runs as an unprivileged user: it creates sandboxes through
// the Backend API and reports what happened as JSON on stdout.
func rootlessChild() int {
	var res rootlessResult
	defer func() { json.NewEncoder(os.Stdout).Encode(res) }()
	ws := os.Getenv("WS")
	b := New(Config{AgentBinary: os.Getenv("AIRLOCK_BIN"), StateDir: filepath.Join(ws, "..", "state")})
	mk := func(limits bool) (*policy.Policy, error) {
		p, _ := policy.Profile("default")
		p.Filesystem.Workspace = ws
		p.Limits = policy.Limits{OpenFiles: 1024}
		if limits {
			p.Limits.Memory = 256 << 20
		}
		return p.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/nonexistent", Environ: []string{"PATH=/usr/bin:/bin"}, UID: os.Getuid(), GID: os.Getgid()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Limits that need a cgroup this user cannot have: fail closed.
	pol, err := mk(true)
	if err != nil {
		res.Err = err.Error()
		return 1
	}
	if _, err := b.Create(ctx, sandbox.Spec{ID: "rootless-limits", Policy: pol}); err != nil {
		res.LimitsErr = err.Error()
		if !errors.Is(err, sandbox.ErrUnavailable) {
			res.LimitsErr += " (not ErrUnavailable)"
		}
	}
	pol, _ = mk(false)
	sb, err := b.Create(ctx, sandbox.Spec{ID: "rootless", Policy: pol})
	if err != nil {
		res.Err = err.Error()
		return 1
	}
	defer sb.Destroy(ctx)
	run := func(args ...string) string {
		var out bytes.Buffer
		p, err := sb.Exec(ctx, sandbox.ExecRequest{Args: args, Stdout: &out, Stderr: &out})
		if err != nil {
			return err.Error()
		}
		p.Wait(ctx)
		return strings.TrimSpace(out.String())
	}
	res.UID = run("id", "-u")
	run("/bin/sh", "-c", "echo hi > "+filepath.Join(ws, "from-sandbox"))
	_, err = os.Stat(filepath.Join(ws, "from-sandbox"))
	res.Wrote = err == nil
	res.Shadow = run("/bin/sh", "-c", "cat /etc/passwd >/dev/null && echo passwd-ok; cat /etc/hostname /proc/1/environ 2>&1 | head -c 300")
	res.Image = rootlessImage(ctx, b, ws)
	return 0
}

// rootlessImage runs an image sandbox as this unprivileged user: a store
// of its own (its files owned by it, whiteouts made without privilege),
// the overlay mounted by the init in its user namespace.
func rootlessImage(ctx context.Context, b *Backend, ws string) string {
	s, err := images.Open(filepath.Join(ws, "..", "store"), images.Options{})
	if err != nil {
		return "open store: " + err.Error()
	}
	if _, err := s.Import(ctx, os.Getenv("BB_TAR"), images.ImportOptions{}); err != nil {
		return "import: " + err.Error()
	}
	r, err := s.Acquire(ctx, "bb:1", "rootless-image", images.AcquireOptions{})
	if err != nil {
		return "acquire: " + err.Error()
	}
	defer r.Release()
	p, _ := policy.Profile("default")
	p.Filesystem.Workspace = ws
	p.Limits = policy.Limits{OpenFiles: 1024}
	p.Process.UID, p.Process.GID = nil, nil
	if err := r.Apply(p); err != nil {
		return "apply: " + err.Error()
	}
	uid, gid := os.Getuid(), os.Getgid()
	p.Process.UID, p.Process.GID = &uid, &gid // one uid: the caller's
	pol, err := p.Resolve(policy.ResolveEnv{Cwd: ws, Home: "/nonexistent", UID: uid, GID: gid})
	if err != nil {
		return "resolve: " + err.Error()
	}
	b.cfg.WritableDir = filepath.Join(ws, "..", "rw")
	sb, err := b.Create(ctx, sandbox.Spec{ID: "rootless-image", Policy: pol, Image: "bb:1", Root: r.SandboxRoot()})
	if err != nil {
		return "create: " + err.Error()
	}
	defer sb.Destroy(ctx)
	var out bytes.Buffer
	pr, err := sb.Exec(ctx, sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", "cat /etc/hostname; pwd; echo x > /tmp/t && echo tmp-ok; echo $IMAGE_VAR"}, Stdout: &out, Stderr: &out})
	if err != nil {
		return "exec: " + err.Error()
	}
	pr.Wait(ctx)
	return strings.TrimSpace(out.String())
}

// copyExecutable copies src to a world-readable directory.
func copyExecutable(t *testing.T, src, dir string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return dst
}

func TestRootless(t *testing.T) {
	testutil.RequireLinux(t)
	testutil.RequireRoot(t) // to switch to uid 65534
	const nobody = 65534
	dir, err := os.MkdirTemp("", "airlock-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := copyExecutable(t, testutil.AirlockBinary(t), dir)
	self := copyExecutable(t, os.Args[0], dir)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	os.Chown(ws, nobody, nobody)
	for _, d := range []string{"state", "store", "rw"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
		os.Chown(filepath.Join(dir, d), nobody, nobody)
	}

	var stderr bytes.Buffer
	cmd := exec.Command(self)
	cmd.Dir = ws
	bbTar := filepath.Join(dir, "bb.tar")
	tg, _ := name.NewTag("bb:1")
	if err := tarball.WriteToFile(bbTar, tg, imagestest.Busybox(t)); err != nil {
		t.Fatal(err)
	}
	os.Chmod(bbTar, 0o644)
	cmd.Env = []string{childEnv + "=rootless", "AIRLOCK_BIN=" + bin, "WS=" + ws, "BB_TAR=" + bbTar, "PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res rootlessResult
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("child: %v / %v\nstdout: %s\nstderr: %s", err, jerr, out, stderr.String())
	}
	t.Logf("child result: %+v", res)
	if res.Err != "" {
		t.Fatalf("rootless sandbox failed: %s\n%s", res.Err, stderr.String())
	}
	hf := HostFeatures()
	if !strings.Contains(strings.Join(hf.CgroupControllers, ","), "memory") || hf.CgroupVersion != "v2" {
		// Without a delegated cgroup, limits must fail closed and say why.
		if !strings.Contains(res.LimitsErr, "controller(s) memory") || strings.Contains(res.LimitsErr, "not ErrUnavailable") {
			t.Errorf("rootless create with a memory limit: got %q, want ErrUnavailable naming the memory controller", res.LimitsErr)
		}
	}
	if res.UID != fmt.Sprint(nobody) {
		t.Errorf("uid inside %q, want %d (the caller's)", res.UID, nobody)
	}
	if !res.Wrote {
		t.Error("could not write the workspace")
	}
	if !strings.Contains(res.Shadow, "passwd-ok") || strings.Contains(res.Shadow, "AIRLOCK") {
		t.Errorf("unexpected view inside: %q", res.Shadow)
	}
	if res.Image != "busybox\n/workspace\ntmp-ok\nfrom-image" {
		t.Errorf("rootless image sandbox: %q", res.Image)
	}
	ents, _ := os.ReadDir(ws)
	for _, e := range ents {
		if e.Name() != "from-sandbox" {
			t.Errorf("left in workspace: %s", e.Name())
		}
	}
}
