package build_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/errdefs"
	"github.com/airlock-dev/airlock/images"
	"github.com/airlock-dev/airlock/images/build"
	"github.com/airlock-dev/airlock/images/imagestest"
	"github.com/airlock-dev/airlock/internal/testutil"
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/sandbox"
)

type fixture struct {
	store *images.Store
	b     sandbox.Backend
	dir   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	testutil.RequireLinux(t)
	testutil.RequireRoot(t)
	dir := t.TempDir()
	s, err := images.Open(filepath.Join(dir, "store"), images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddImage(context.Background(), imagestest.Busybox(t), images.AddOptions{Names: []string{"busybox:1"}}); err != nil {
		t.Fatal(err)
	}
	b := native.New(native.Config{AgentBinary: testutil.AirlockBinary(t), StateDir: filepath.Join(dir, "state"), WritableDir: filepath.Join(dir, "rw")})
	return &fixture{store: s, b: b, dir: dir}
}

// build writes files into a fresh context and builds it.
func (f *fixture) build(t *testing.T, files map[string]string, tag string) (*images.Image, string, error) {
	t.Helper()
	ctxDir := filepath.Join(t.TempDir(), "ctx")
	for name, data := range files {
		p := filepath.Join(ctxDir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	im, err := build.Build(context.Background(), build.Options{
		Store: f.store, Backend: f.b, Dockerfile: filepath.Join(ctxDir, "Dockerfile"), Context: ctxDir,
		Tags: []string{tag}, Out: &out, WritableDir: filepath.Join(f.dir, "build"),
	})
	return im, out.String(), err
}

// run runs argv (nil: the image's command) in a sandbox of ref.
func (f *fixture) run(t *testing.T, ref string, argv ...string) string {
	t.Helper()
	r, err := f.store.Acquire(context.Background(), ref, "run-"+strings.ReplaceAll(t.Name(), "/", "-"), images.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	p, _ := policy.Profile("default")
	spec := imagestest.Spec(t, r, p, "")
	spec.ID = "bt-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	sb, err := f.b.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	var out bytes.Buffer
	proc, err := sb.Exec(context.Background(), sandbox.ExecRequest{Args: r.Image.Config.Argv(argv), Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	proc.Wait(context.Background())
	return strings.TrimSpace(out.String())
}

func TestBuildRunCopyEnv(t *testing.T) {
	f := newFixture(t)
	files := map[string]string{
		"Dockerfile": `FROM busybox:1
ARG WHO=world
RUN echo "hello $WHO" > /greeting && rm /etc/hostname && mkdir -p /var/data
COPY app.sh lib/ /opt/app/
ENV APP_MODE=test
WORKDIR /opt/app
USER user
CMD ["sh", "app.sh"]
`,
		"app.sh":         "echo \"$(cat /greeting) mode=$APP_MODE in $(pwd) as $(id -u); $(cat helper.txt)\"; ls /etc/hostname 2>&1",
		"lib/helper.txt": "helper",
	}
	im, log, err := f.build(t, files, "built:1")
	if err != nil {
		t.Fatalf("build: %v\n%s", err, log)
	}
	if im.Config.User != "user" || im.Config.WorkingDir != "/opt/app" || len(im.Layers) != 3 {
		t.Errorf("image %+v layers %d", im.Config, len(im.Layers))
	}
	got := f.run(t, "built:1")
	if !strings.Contains(got, "hello world mode=test in /opt/app as 1000; helper") || !strings.Contains(got, "No such file") {
		t.Errorf("built image runs: %q", got)
	}
	// Again: every step from the cache, the same image.
	im2, log2, err := f.build(t, files, "built:2")
	if err != nil {
		t.Fatal(err)
	}
	if im2.ID != im.ID || strings.Count(log2, "cached") != 6 {
		t.Errorf("rebuild: %s vs %s\n%s", im2.ID, im.ID, log2)
	}
	// A changed file: the COPY and everything after it run again.
	files["app.sh"] = "echo changed"
	_, log3, err := f.build(t, files, "built:3")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(log3, "cached") != 1 {
		t.Errorf("after a change, only the RUN is cached:\n%s", log3)
	}
	if got := f.run(t, "built:3"); got != "changed" {
		t.Errorf("rebuilt image: %q", got)
	}
}

func TestBuildErrorsNameTheLine(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		df   string
		want string
		kind error
	}{
		{"FROM busybox:1\nRUN exit 3\n", "Dockerfile:2: RUN", errdefs.ErrInvalid},
		{"FROM busybox:1\nEXPOSE 80\n", "Dockerfile:2: EXPOSE is not supported", errdefs.ErrNotSupported},
		{"FROM busybox:1\nCOPY ../../etc/passwd /x\n", "Dockerfile:2: COPY", errdefs.ErrNotFound},
		{"FROM busybox:1\nCOPY link/passwd /x\n", "Dockerfile:2: COPY", nil},
		{"FROM busybox:1\nADD https://example.com/x /x\n", "Dockerfile:2: ADD", errdefs.ErrNotSupported},
		{"FROM busybox:1\nCOPY --from=0 a /x\n", "Dockerfile:2: COPY", errdefs.ErrNotSupported},
		{"FROM nope:1\n", "Dockerfile:1: FROM", errdefs.ErrNotFound},
		{"FROM busybox:1 AS a\nFROM a\n", "Dockerfile:2: a second FROM", errdefs.ErrNotSupported},
	} {
		files := map[string]string{"Dockerfile": c.df}
		_, log, err := f.build(t, files, "bad:1")
		if err == nil || !strings.Contains(err.Error(), c.want) || c.kind != nil && !errors.Is(err, c.kind) {
			t.Errorf("%q: %v, want %q (%v)\n%s", c.df, err, c.want, c.kind, log)
		}
	}
	// A symlink in the context pointing out of it is not followed.
	ctxDir := filepath.Join(t.TempDir(), "c")
	os.MkdirAll(ctxDir, 0o755)
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM busybox:1\nCOPY link/passwd /x\n"), 0o644)
	os.Symlink("/etc", filepath.Join(ctxDir, "link"))
	_, err := build.Build(context.Background(), build.Options{Store: f.store, Backend: f.b, Dockerfile: filepath.Join(ctxDir, "Dockerfile"), Context: ctxDir, WritableDir: filepath.Join(f.dir, "build")})
	if err == nil {
		t.Errorf("COPY through a symlink out of the context: built")
	}
	if ents, _ := os.ReadDir(filepath.Join(f.dir, "build")); len(ents) != 0 {
		t.Errorf("failed builds left %d entries in the writable dir", len(ents))
	}
}

// A RUN step has no network without an allow-list.
func TestBuildRunHasNoNetwork(t *testing.T) {
	f := newFixture(t)
	_, log, err := f.build(t, map[string]string{"Dockerfile": "FROM busybox:1\nRUN ip link 2>/dev/null | grep -c 'link/ether' | grep -qx 0 && ! wget -q -T 2 -O- http://93.184.215.14/ \n"}, "nonet:1")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
}
